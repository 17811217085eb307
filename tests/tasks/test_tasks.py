"""Tasks built from dataclass configs, in process: no FlagValues, no subprocess.

Each task trains a tiny model for a few steps on fixture data, evaluates it and gives
the fields of results.json; bad settings are ordinary :class:`ConfigError` s naming
the setting (the CLIs turn them into flag errors)."""

import dataclasses
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.attention.acvi import floor_log_sigma_sq
from acvi_tf.errors import ConfigError, RunError
from acvi_tf.metrics import diversity, repetition
from acvi_tf.metrics.caption import java_available
from acvi_tf.models import build_model
from acvi_tf.models.seq2seq import ModelConfig
from acvi_tf.run.results import finish_results, update_results
from acvi_tf.tasks import TASKS, DecodeConfig, RunInfo, decode_batches, system_name
from acvi_tf.tasks.captioning import CaptioningConfig, CaptioningTask
from acvi_tf.tasks.translation import (TranslationConfig, TranslationTask, Translator,
                                      source_batches)
from acvi_tf.training.trainer import TrainConfig
from acvi_tf.utils.files import save_json
from tests.experiments.test_caption import _write_mirror as _write_msvd
from tests.experiments.test_translate import _write_mirror as _write_multi30k

TINY = dict(embed_dim=8, encoder_units=8, decoder_units=8, attention_units=8, head_units=8,
            encoder_layers=1, decoder_layers=1, score="multiplicative")
DECODE = DecodeConfig(beam_width=2, decode_max_length=8, eval_subset=4, decode_batch_size=16)
RUN = RunInfo(profile="smoke", command="python -m tests", argv=["tests"])


def _train_config(model_dir, steps=3):
    return TrainConfig(model_dir=model_dir, train_steps=steps, learning_rate=1e-2,
                       eval_every=0, checkpoint_every=steps, log_every=1, progress=False,
                       gumbel_fraction=0.0)


def test_the_registry_names_every_task():
    assert {"translate", "summarize", "caption"} <= set(TASKS.names())
    assert TASKS.get("translate") is TranslationTask


def test_translation_trains_evaluates_and_reports(tmp_path, monkeypatch):
    monkeypatch.setenv("ACVI_DATA_MIRROR", _write_multi30k(str(tmp_path / "mirror")))
    monkeypatch.setenv("ACVI_DATA_DIR", str(tmp_path / "data"))
    model_dir = str(tmp_path / "run")
    task = TranslationTask(TranslationConfig(dataset="multi30k", min_count=1, batch_size=8,
                                             max_eval_lines=6), DECODE, RUN, log=lambda m: None)
    assert (task.src, task.tgt) == ("en", "de")
    complete, lines = task.data_status()
    assert not complete and any("PARTIAL" in line for line in lines)  # the fixture is a head
    task.load_data(model_dir)
    assert os.path.exists(os.path.join(model_dir, "vocab.en.txt"))
    config = task.model_config(ModelConfig(attention="acvi", **TINY))
    assert config.src_vocab_size == len(task.data.src_vocab)
    trained = task.train(task.prepare_training(model_dir, config, _train_config(model_dir)))
    model, info = trained.model, trained.info
    assert info["steps"] == 3 and info["train_command"] == RUN.command
    assert "dev_nll" in info["diagnostics"]  # the dev diagnostics of the final evaluation
    splits, seconds = trained.evaluator.evaluate(model, info["steps"], model_dir)
    assert set(splits) == {"dev", "test"} and splits["test"]["sentences"] == 6
    results = task.results((splits, seconds), config, info["steps"], extra=info)
    assert results["system"] == system_name(config) == "acvi"
    task.run = dataclasses.replace(RUN, system="acvi_paper_elbo")  # --system names the row
    # --attention_plots: one picture per sentence asked for, and ACVI's sigma panel holds
    # the mean sigma of Eq. 18 computed here from the encoder states directly
    lines = ["a man sleeps", "two dogs run fast"]
    hyps = task.decode(trained, lines, str(tmp_path / "plots"), plot_count=1)
    assert len(hyps) == 2 and os.listdir(tmp_path / "plots") == ["attention_0000.png"]
    ids = task.source_ids(lines[:1])[0]
    src = tf.constant([ids], tf.int32)
    memory, _ = model.encoder(src, model.source_mask({"src": src}), training=False)
    log_sigma_sq = floor_log_sigma_sq(model.variant.log_sigma_sq_net(memory))
    np.testing.assert_allclose(decode_batches.source_sigma(model, ids),
                               np.exp(0.5 * log_sigma_sq.numpy()[0]).mean(-1), rtol=1e-5)
    assert task.results((splits, seconds), config, info["steps"])["system"] == "acvi_paper_elbo"
    assert results["profile"] == "smoke" and results["partial_eval"] is True
    assert results["decode"]["beam_width"] == 2
    saved = finish_results(model_dir, results)
    assert saved["wall_time_sec"] > 0 and "diversity" in saved["splits"]["test"]
    # N-GRR (VRNMT Eq. 27) of each split's decode, as the metric computes it from the file
    with open(saved["splits"]["test"]["decode_file"], encoding="utf-8") as f:
        decoded = f.read().splitlines()
    assert {int(n): v for n, v in saved["repetition"]["test"].items()} == \
        repetition.repetition_table(decoded)
    # The trained model reloads from the run directory and decodes text.
    reloaded = task.restore(model_dir, config)
    assert reloaded.step == 3 and reloaded.info is None
    assert len(task.decode(reloaded, ["a dog runs .", ""])) == 2
    # the evaluation of a restored model gives the same fields (no training's among them)
    again = task.evaluate(reloaded, model_dir)
    assert again["bleu"] == results["bleu"] and "train_command" not in again


def test_dev_diagnostics_run_length_sorted_batches_and_equal_the_files_order(tmp_path,
                                                                           monkeypatch):
    # The teacher-forced dev passes batch the pairs sorted by length (less padding, half
    # the time on Multi30k's val); the diagnostics are sums over tokens, so they equal
    # those of batches in the file's order.
    from acvi_tf.data.batching import Batches
    from acvi_tf.training.diagnostics import DevDiagnostics
    mirror = _write_multi30k(str(tmp_path / "mirror"))
    # val pairs of 4 to 10 tokens, short and long alternating, as the file order mixes them
    tails = ["on the grass", "in the park with a red ball", "", "with a blue ball in the snow"]
    en = [f"a man runs {tails[i % 4]} .".replace("  ", " ") for i in range(12)]
    de = [" ".join({"a": "ein", "man": "mann", "runs": "läuft"}.get(w, w) for w in line.split())
          for line in en]
    for lang, lines in (("en", en), ("de", de)):
        with open(os.path.join(mirror, "multi30k", "tok", f"val.lc.norm.tok.{lang}"), "w") as f:
            f.write("\n".join(lines) + "\n")
    monkeypatch.setenv("ACVI_DATA_MIRROR", mirror)
    monkeypatch.setenv("ACVI_DATA_DIR", str(tmp_path / "data"))
    task = TranslationTask(TranslationConfig(dataset="multi30k", min_count=1, max_eval_lines=12),
                           dataclasses.replace(DECODE, decode_batch_size=4), RUN,
                           log=lambda m: None)
    task.load_data(str(tmp_path / "run"))
    keras.utils.set_random_seed(0)
    model = build_model(task.model_config(ModelConfig(attention="soft", **TINY)))
    model.loss_terms({k: tf.constant(v) for k, v in task.build_batch().items()})
    evaluator = task.evaluator()
    sorted_diag = evaluator.dev_diagnostics(model, 0)
    lengths = [b["tgt_in"].shape[1] for b in evaluator._loss_batches[12].dataset()]
    src_ids, tgt_ids, _ = task.data.encode("dev", max_lines=12)
    in_order = Batches(src_ids, tgt_ids, 4, shuffle=False, bucketing=False, max_src_len=None,
                       max_tgt_len=None, prefetch=False)
    file_lengths = [b["tgt_in"].shape[1] for b in in_order.dataset()]
    assert lengths == sorted(lengths) and sum(lengths) < sum(file_lengths)
    file_diag = DevDiagnostics()(model, in_order.dataset())
    assert set(sorted_diag) == set(file_diag)
    for name, value in file_diag.items():
        np.testing.assert_allclose(sorted_diag[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_translation_config_errors_name_the_setting():
    with pytest.raises(ConfigError, match="^src: 'vi' is not a language"):
        TranslationTask(TranslationConfig(dataset="multi30k", src="vi"))
    with pytest.raises(ConfigError, match="^variant:"):
        TranslationConfig(dataset="iwslt15_en_vi", variant="raw").check()


def test_captioning_on_synthetic_features(tmp_path, monkeypatch):
    monkeypatch.setenv("ACVI_DATA_MIRROR", _write_msvd(str(tmp_path / "mirror")))
    monkeypatch.setenv("ACVI_DATA_DIR", str(tmp_path / "data"))
    model_dir = str(tmp_path / "run")
    task = CaptioningTask(CaptioningConfig(synthetic_features=True, max_eval_clips=4,
                                           batch_size=8), DECODE, RUN, log=lambda m: None)
    data = task.load_data(model_dir)
    assert data.dim == 1024 and len(data.splits["val"].clips) == 4
    config = task.model_config(dataclasses.replace(ModelConfig(**TINY), score="additive"))
    assert config.feature_dim == 1024 and config.src_vocab_size is None
    trained = task.train(task.prepare_training(model_dir, config, _train_config(model_dir, 2)))
    info = trained.info
    assert "dev_nll" in info["diagnostics"] and "val_CIDEr_D" in info["diagnostics"]
    results = task.evaluate(trained, model_dir)
    assert results["synthetic_features"] is True and "SYNTHETIC" in results["WARNING"]
    assert results["system"] == "soft" and set(results["scores"]) == {"val", "test"}
    if java_available():  # meteor=True (the default) scores METEOR on both splits
        assert all("METEOR" in results["scores"][s] for s in ("val", "test"))
    with pytest.raises(ConfigError, match="^input:"):
        task.decode(trained, ["not-a-clip"])
    with pytest.raises(ConfigError, match="^synthetic_features:"):
        CaptioningTask(CaptioningConfig(features="x", synthetic_features=True)).load_data(
            str(tmp_path / "other"))


def test_summarization_phases_coverage_and_lead3(tmp_path, monkeypatch):
    from acvi_tf.metrics import rouge
    from acvi_tf.tasks.summarization import (SummarizationConfig, SummarizationTask,
                                             percent_rouge, read_pairs, summary_sentences,
                                             system_of)
    from tests.experiments.test_summarize import _write_mirror as _write_cnndm
    monkeypatch.setenv("ACVI_DATA_MIRROR", _write_cnndm(str(tmp_path / "mirror")))
    monkeypatch.setenv("ACVI_DATA_DIR", str(tmp_path / "data"))
    config = SummarizationConfig(vocab_size=40, max_enc_steps=12, max_dec_steps=6,
                                 phases="none", coverage_steps=1, batch_size=4, meteor=False,
                                 eval_before_coverage=False, max_eval_pairs=4)
    with pytest.raises(ConfigError, match="^coverage_steps: 1 leaves no step"):
        config.check(train_steps=1)
    with pytest.raises(ConfigError, match="^coverage_steps: 1 coverage steps need"):
        config.check(coverage=False)
    with pytest.raises(ConfigError, match="^phase_steps: 5 lays out Table 5's phases; "
                                          "--phases=none has none"):
        dataclasses.replace(config, phase_steps=5).check(train_steps=10)
    with pytest.raises(ConfigError, match="^phase_steps: 10 is more than the 9 steps before "
                                          "coverage"):
        dataclasses.replace(config, phases="table5", phase_steps=10).check(train_steps=10)
    assert dataclasses.replace(config, phases="table5", phase_steps=9).schedule(
        10, True).phases[-1] == (9, 12, 6)
    decode = dataclasses.replace(DECODE, min_length=2, length_normalization="average")
    task = SummarizationTask(config, decode, RUN, log=lambda m: None)
    model_dir = str(tmp_path / "run")
    task.load_data(model_dir)
    arch = dataclasses.replace(ModelConfig(**TINY), score="additive", head="pointer",
                               coverage=True)
    model_config = task.model_config(arch)
    assert system_of(model_config) == "soft"
    assert system_of(dataclasses.replace(model_config, head="softmax")) == "seq2seq-soft"
    trained = task.train(task.prepare_training(model_dir, model_config,
                                               _train_config(model_dir, 3)))
    model, evaluator, info = trained.model, trained.evaluator, trained.info
    assert info["coverage_steps"] == 1 and evaluator.coverage_at(3)
    assert not evaluator.coverage_at(2)
    # --attention_plots in decode: one picture per non-empty article asked for
    out = task.decode(trained, ["", "the cat sat on the mat .", "a dog ran ."],
                      attention_plots=str(tmp_path / "plots"), plot_count=1)
    assert len(out) == 3 and out[0] == ""
    assert os.listdir(tmp_path / "plots") == ["attention_0000.png"]
    # Evaluation scores with ROUGE-1.5.5: skipped only where its Perl cannot run (named);
    # any other exception from here on is a failure.
    missing = rouge.missing_requirements()
    if missing:
        pytest.skip(f"ROUGE-1.5.5 cannot run: {missing}")
    scores = evaluator.evaluate(model, 3, model_dir)
    results = task.results(scores, model_config, 3, extra=info)
    assert results["task"] == "summarize" and results["head"] == "pointer"
    assert {"rouge_1", "rouge_2", "rouge_l"} <= set(results["rouge"])
    assert scores["test_articles"] == 4
    # --mode=val: the same decode and ROUGE on the val articles, under "val"; the test
    # scores already in results.json stay.
    save_json(os.path.join(model_dir, "results.json"), results)
    saved = update_results(model_dir, **task.validate(trained, model_dir))
    assert saved["rouge"] == results["rouge"] and saved["val"]["val_articles"] == 4
    val_pairs, _ = read_pairs("val", 4)
    with open(os.path.join(model_dir, "reference_val.txt"), encoding="utf-8") as f:
        assert f.read().splitlines() == [" ".join(p.abstract_sents) for p in val_pairs]
    with open(os.path.join(model_dir, "decode_val.txt"), encoding="utf-8") as f:
        val_hyps = [summary_sentences(line.split()) or ["."] for line in f.read().splitlines()]
    want = percent_rouge(rouge.rouge_cnndm(val_hyps, [p.abstract_sents for p in val_pairs]))
    assert saved["val"]["rouge"] == want
    lead = task.lead3(str(tmp_path / "lead3"))
    assert lead["system"] == "lead-3" and lead["head"] is None


def _untrained(model_config, batch):
    """The model of ``model_config``, built on ``batch``, seeded, untrained."""
    keras.utils.set_random_seed(0)
    model = build_model(model_config)
    model.build_for_checkpoint({k: tf.convert_to_tensor(v) for k, v in batch.items()})
    return model


def test_summarization_sampled_diversity_draws_k_summaries_per_article(tmp_path, monkeypatch):
    """--diversity_samples in summarization: K sampled pointer-generator summaries per
    article, as word lists with the article's OOVs, scored per article and averaged
    exactly as per_source_diversity scores them; soft attention is refused."""
    from acvi_tf.tasks import summarization as summ
    from tests.experiments.test_summarize import _write_mirror as _write_cnndm
    monkeypatch.setenv("ACVI_DATA_MIRROR", _write_cnndm(str(tmp_path / "mirror")))
    monkeypatch.setenv("ACVI_DATA_DIR", str(tmp_path / "data"))
    config = summ.SummarizationConfig(vocab_size=40, max_enc_steps=12, max_dec_steps=6,
                                      phases="none", batch_size=4, meteor=False,
                                      eval_before_coverage=False, max_eval_pairs=4)
    decode = dataclasses.replace(DECODE, diversity_samples=3, diversity_sources=2,
                                 decode_max_length=6)
    task = summ.SummarizationTask(config, decode, RUN, log=lambda m: None)
    task.load_data(str(tmp_path / "run"))

    def built(attention):
        return _untrained(task.model_config(dataclasses.replace(
            ModelConfig(attention=attention, **TINY), score="additive", head="pointer")),
            summ.build_batch(True))
    model = built("acvi")
    evaluator = task.evaluator(model.config, 1)
    _, examples, _ = evaluator.examples("test", 4)
    groups = evaluator.summarizer(model).sampled(examples[:2], 3, max_length=6)
    assert [len(g) for g in groups] == [3, 3]
    assert any(len({tuple(w) for w in g}) > 1 for g in groups), groups  # sampled
    words = {w for g in groups for s in g for w in s}
    allowed = set(task.vocab.tokens) | {w for e in examples[:2] for w in e.article_oovs}
    assert words <= allowed, words - allowed  # ids map back through the article's OOVs
    assert model.variant.sample_at_decode is False  # switched back
    scores = evaluator.sampled_diversity(model, examples)
    want = diversity.per_source_diversity([[" ".join(s) for s in g] for g in groups])
    assert scores["groups"] == 2 and scores["samples"] == 3
    for k in ("entropy", "distinct_1", "distinct_2", "tokens"):
        assert scores[k] == pytest.approx(want[k])  # the same seeds give the same samples
    with pytest.raises(RunError, match="--diversity_samples: soft samples nothing"):
        evaluator.sampled_diversity(built("soft"), examples)


def test_sampled_diversity_protocol_draws_k_decodes_per_source(tmp_path, monkeypatch):
    """--diversity_samples: K greedy decodes per source with ACVI's context sampled (each
    with its own seed, so they differ), scored per source and averaged exactly as
    per_source_diversity scores the same groups; the model's decoding is left as it was,
    and soft attention, which samples nothing, is refused."""
    monkeypatch.setenv("ACVI_DATA_MIRROR", _write_multi30k(str(tmp_path / "mirror")))
    monkeypatch.setenv("ACVI_DATA_DIR", str(tmp_path / "data"))
    decode = dataclasses.replace(DECODE, diversity_samples=4, diversity_sources=3)
    task = TranslationTask(TranslationConfig(dataset="multi30k", min_count=1, batch_size=8,
                                             max_eval_lines=6), decode, RUN, log=lambda m: None)
    task.load_data(str(tmp_path / "run"))
    def built(attention):
        return _untrained(task.model_config(ModelConfig(attention=attention, **TINY)),
                          task.build_batch())
    model = built("acvi")
    evaluator = task.evaluator()
    src_ids = evaluator.split("test")[0][:3]
    groups = decode_batches.sampled_decodes(model, Translator.SIGNATURE, [len(s) for s in src_ids],
                                  source_batches(src_ids), 4, max_length=8)
    assert [len(g) for g in groups] == [4, 4, 4]
    assert any(len({tuple(ids) for ids in g}) > 1 for g in groups), groups  # sampled
    assert model.variant.sample_at_decode is False  # switched back
    scores = evaluator.sampled_diversity(model, "test")
    want = diversity.per_source_diversity([task.data.decode_batch(g) for g in groups])
    assert scores["groups"] == 3 and scores["samples"] == 4
    for k in ("entropy", "distinct_1", "distinct_2", "tokens"):
        assert scores[k] == pytest.approx(want[k])  # the same seeds give the same samples
    splits, _ = evaluator.evaluate(model, 0, str(tmp_path / "run"))  # --diversity_samples=4
    assert splits["test"]["sampled_diversity"] == scores
    soft = built("soft")
    with pytest.raises(RunError, match="--diversity_samples: soft samples nothing"):
        evaluator.sampled_diversity(soft, "test")
