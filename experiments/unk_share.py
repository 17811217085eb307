r"""How much of CNN/DailyMail is ``<unk>`` at a given vocabulary size (issue 34, item 3).

    ACVI_DATA_MIRROR=/work/shared/data python -m experiments.unk_share \
        --vocab_sizes 20000 60000 --splits train val --out results/summarization_unk_share.json

The vocabulary is the one ``experiments.summarize`` writes to a run's ``vocab.txt`` on
its first run (:meth:`acvi_tf.tasks.summarization.SummarizationTask.load_data`: the
first ``vocab_size`` ids of See et al.'s ``finished_files/vocab``, the 4 special tokens
included), and each pair is encoded as training encodes it
(:class:`acvi_tf.data.cnndm.EncodedPairs` at the cpu profile's 200 / 50 tokens), so the
shares are those of the tokens the loss sees:

* ``target_unk_softmax``: target tokens (the summary cut to ``max_dec_steps``, ``</s>``
  included where the cut leaves it, as the loss counts them) that are ``<unk>`` for the
  softmax head of the plain seq2seq and Transformer rows (every OOV;
  :func:`acvi_tf.tasks.summarization_eval.model_inputs`);
* ``target_unk_pointer``: the same tokens that stay ``<unk>`` for the pointer-generator
  (OOVs absent from the truncated article, which the pointer cannot copy);
* ``source_unk``: article tokens the encoder reads (the first ``max_enc_steps``) that are
  ``<unk>``; ``source_unk_full``: over the whole article;
* ``unk_rank``: the rank of ``<unk>`` among the softmax targets' token types by count (1:
  it is the most frequent target token), with ``top_targets``, the most frequent ones and
  their shares: a decoder that has not learned content words predicts the most frequent
  class wherever content goes.
"""

import argparse
import collections
import json
import os
import sys

import numpy as np

from acvi_tf.data import cnndm

TOP = 8


def shares(pairs, vocab, max_enc_steps=200, max_dec_steps=50):
    """The ``<unk>`` shares (see the module docstring) of ``pairs`` (``article``,
    ``abstract_sents`` pairs) under ``vocab``; empty articles are skipped as training
    skips them."""
    store = cnndm.EncodedPairs(vocab, max_enc_steps, max_dec_steps)
    size, unk = len(vocab), vocab.unk_id
    counts = collections.Counter()
    targets = collections.Counter()
    for article, abstract_sents in pairs:
        try:
            store.add(article, abstract_sents)
        except ValueError:  # an empty article: training skips it too
            counts["skipped"] += 1
            continue
        ex = store.example(len(store) - 1)
        target = np.asarray(ex.target, np.int64)
        softmax = np.where(target >= size, unk, target)
        counts["pairs"] += 1
        counts["target_tokens"] += target.size
        counts["target_unk_softmax"] += int((softmax == unk).sum())
        counts["target_unk_pointer"] += int((target == unk).sum())
        counts["targets_with_unk"] += int((softmax == unk).any())
        counts["source_tokens"] += len(ex.enc_input)
        counts["source_unk"] += int((np.asarray(ex.enc_input) == unk).sum())
        words = cnndm.split_words(article)
        counts["source_tokens_full"] += len(words)
        counts["source_unk_full"] += sum(vocab.token_to_id(w) == unk for w in words)
        targets.update(softmax.tolist())
    n_tgt, n_src = counts["target_tokens"], counts["source_tokens"]
    ranked = [t for t, _ in targets.most_common()]
    return {
        "vocab_size": size, "max_enc_steps": max_enc_steps, "max_dec_steps": max_dec_steps,
        "pairs": counts["pairs"], "skipped_empty_article": counts["skipped"],
        "target_tokens": n_tgt,
        "target_unk_softmax": counts["target_unk_softmax"] / max(1, n_tgt),
        "target_unk_pointer": counts["target_unk_pointer"] / max(1, n_tgt),
        "targets_with_unk": counts["targets_with_unk"] / max(1, counts["pairs"]),
        "source_tokens": n_src,
        "source_unk": counts["source_unk"] / max(1, n_src),
        "source_unk_full": counts["source_unk_full"] / max(1, counts["source_tokens_full"]),
        "unk_rank": ranked.index(unk) + 1 if unk in targets else None,
        "top_targets": [[vocab.id_to_token(t), targets[t] / max(1, n_tgt)]
                        for t in ranked[:TOP]],
    }


def run(vocab_sizes, splits, max_enc_steps, max_dec_steps, max_pairs=None, log=print):
    """``{split: {vocab_size: shares}}`` over the local chunks of each split."""
    out = {}
    for split in splits:
        pairs = [(p.article, p.abstract_sents)
                 for p in cnndm.iter_pairs(split, limit=max_pairs)]
        for size in vocab_sizes:
            s = shares(pairs, cnndm.load_vocab(size), max_enc_steps, max_dec_steps)
            log(f"{split} {size:,}: target <unk> {100 * s['target_unk_softmax']:.2f}% "
                f"(softmax head; pointer {100 * s['target_unk_pointer']:.2f}%), rank "
                f"{s['unk_rank']}; source <unk> {100 * s['source_unk']:.2f}% (first "
                f"{max_enc_steps}), {100 * s['source_unk_full']:.2f}% (full); {s['pairs']:,} "
                f"pairs")
            out.setdefault(split, {})[str(size)] = s
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vocab_sizes", type=int, nargs="+", default=[20_000, 60_000])
    p.add_argument("--splits", nargs="+", default=["train", "val"])
    p.add_argument("--max_enc_steps", type=int, default=200)
    p.add_argument("--max_dec_steps", type=int, default=50)
    p.add_argument("--max_pairs", type=int, default=None, help="the first N pairs of a split")
    p.add_argument("--out", default=None, help="write the shares as JSON here")
    args = p.parse_args(argv)
    result = {"command": "python -m experiments.unk_share " + " ".join(
        argv if argv is not None else sys.argv[1:]),
        "shares": run(args.vocab_sizes, args.splits, args.max_enc_steps, args.max_dec_steps,
                      args.max_pairs)}
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    return result


if __name__ == "__main__":
    main()
