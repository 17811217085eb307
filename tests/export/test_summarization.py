"""The summarization SavedModel (--mode=export): See et al.'s article2ids in the graph
equals the Python one, and the export, loaded in a process that never imports acvi_tf,
gives exactly the CLI's --mode=decode summaries (copied article OOVs, empty lines)."""


import pytest
import tensorflow as tf

from acvi_tf.data import cnndm
from acvi_tf.data.vocab import Vocab
from acvi_tf.export import base, summarization
from tests.experiments.test_summarize import _cli, _test_articles, _write_mirror
from tests.export.serving import run_env, serve_in_fresh_process


def test_article_oov_ids_match_see_et_al_article2ids():
    vocab = Vocab(["<pad>", "<unk>", "<s>", "</s>", "the", "cat", "sat", "on", "mat", "."])
    articles = ["the cat sat on the zebra mat zebra . qux", "", "ab ab cd the ab ef",
                "the cat .", "zebra"]  # "zebra" in two articles gets an id in each
    words = tf.strings.split(tf.constant(articles))
    ids = base.string_table(vocab.tokens, vocab.unk_id).lookup(words)
    ext, oovs, max_oovs = summarization.article_oov_ids(words, ids, len(vocab), vocab.unk_id)
    for article, got_ids, got_oovs in zip(articles, ext.to_list(), oovs.to_list()):
        want_ids, want_oovs = cnndm.article2ids(article.split(), vocab)
        assert got_ids == want_ids
        assert [w.decode() for w in got_oovs] == want_oovs
    assert int(max_oovs) == 3
    # and back: extended ids decode to the row's own OOV words, as outputids2words
    hyp = tf.constant([[4, 11, 10], [4, 4, 4], [10, 12, 4], [5, 6, 7], [10, 4, 4]])
    words_out = summarization.output_words(hyp, vocab.tokens, oovs).numpy().tolist()
    assert [w.decode() for w in words_out[0]] == cnndm.outputids2words(
        [4, 11, 10], vocab, ["zebra", "qux"])
    assert [w.decode() for w in words_out[2]] == ["ab", "ef", "the"]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("export_summ")
    return run_env(root, _write_mirror), root


def test_the_export_summarizes_exactly_as_the_cli_decodes(env):
    env, root = env
    model_dir, export_dir = str(root / "run"), str(root / "export")
    # ACVI with the pointer and coverage, the smoke profile's 8 steps: the pointer already
    # copies article OOVs (checked below), so longer training would only cost time.
    r = _cli(["--profile=smoke", "--attention=acvi", f"--model_dir={model_dir}", "--mode=train",
              "--train_steps=8", "--checkpoint_every=8"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    articles = [str(a.article) for a in _test_articles(env)][:4]
    lines = [articles[0], "", "zorblat quixby zorblat mervane", articles[1],
             articles[2] + " " + articles[3]]  # the last is cut to max_enc_steps
    src = root / "articles.txt"
    src.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    r = _cli([f"--model_dir={model_dir}", "--mode=export", f"--export_dir={export_dir}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    r = _cli([f"--model_dir={model_dir}", "--mode=decode", f"--input={src}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    cli = r.stdout.split("\n")[:-1]
    assert len(cli) == len(lines) and cli[1] == ""

    served = serve_in_fresh_process(export_dir, str(root), text=lines)
    assert served["summary"] == cli
    assert served["score"][1] == 0.0
    copied = {w for s in cli for w in s.split()} & {"zorblat", "quixby", "mervane", "tollund",
                                                    "braxa", "vintor"}
    assert copied, cli  # the pointer copied an article OOV, through the extended ids
