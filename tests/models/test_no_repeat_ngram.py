"""``no_repeat_ngram`` (DecodeConfig, --no_repeat_ngram): no decode of any model repeats an
n-gram of its own output, greedy and beam, and the option reaches the models' decode only
when set (results.json's ``decode`` of every other run stays as it was)."""

import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.tasks.base import DecodeConfig
from tests.decoding.test_ngram_block import python_bans
from tests.models.test_ban_unk import _model


def _has_repeat(seq, n):
    return any(seq[i] in python_bans(seq[:i], n) for i in range(len(seq)))


@pytest.mark.parametrize("kind", ["soft", "acvi", "transformer"])
@pytest.mark.parametrize("beam_width", [1, 3])
def test_no_output_repeats_an_ngram(kind, beam_width):
    """The output bias makes <unk> win every step, so the plain decode is "<unk> <unk>
    ..." (every bigram repeated); with bigram blocking no beam holds a repeated bigram."""
    model, batch, config = _model(kind)
    plain = model.decode(batch, beam_width=beam_width, max_length=6)
    blocked = model.decode(batch, beam_width=beam_width, max_length=6, no_repeat_ngram=2)

    def rows(out, best_only=False):
        ids, lengths = out["ids"].numpy(), out["lengths"].numpy()
        if best_only and beam_width > 1:
            ids, lengths = ids[:, 0], lengths[:, 0]
        ids, lengths = ids.reshape(-1, ids.shape[-1]), lengths.reshape(-1)
        return [row[:n].tolist() for row, n in zip(ids, lengths)]
    assert all(_has_repeat(seq, 2) for seq in rows(plain, best_only=True))
    assert not any(_has_repeat(seq, 2) for seq in rows(blocked))
    if beam_width == 1:  # greedy: the step's argmax with the bigram bans applied
        memory_state, state = model.start(batch, training=False, **(
            {"max_length": 6} if kind == "transformer" else {}))
        seqs = rows(blocked)
        inputs = tf.fill([len(seqs)], config.bos_id)
        for t in range(max(len(s) for s in seqs)):
            log_probs, state, _ = model.step(inputs, state, memory_state, training=False)
            masked = log_probs.numpy().copy()
            masked[:, [config.pad_id, config.bos_id]] = -np.inf
            for r, seq in enumerate(seqs):
                if t < len(seq):
                    masked[r, list(python_bans(seq[:t], 2))] = -np.inf
                    assert seq[t] == masked[r].argmax(), (r, t, seq)
            inputs = tf.constant([s[t] if t < len(s) else config.eos_id for s in seqs])


def test_the_option_reaches_decode_only_when_set():
    assert "no_repeat_ngram" not in DecodeConfig().options()
    assert DecodeConfig(no_repeat_ngram=3).options(final=False)["no_repeat_ngram"] == 3
    assert DecodeConfig(no_repeat_ngram=3).options(final=True)["no_repeat_ngram"] == 3
