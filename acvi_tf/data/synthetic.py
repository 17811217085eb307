"""A small built-in synthetic translation task: tests and the no-data demo use it.

Source: random tokens; target: the source reversed with every token mapped
through a fixed permutation. Solving it needs attention (a position-dependent
alignment), so soft attention and ACVI both have something to learn, and the
copy-the-source baseline scores badly.
"""

import numpy as np

PAD, UNK, BOS, EOS = 0, 1, 2, 3
NUM_SPECIAL = 4


class ReverseTask:
    """Batches for the data protocol of :mod:`acvi_tf.training.trainer`.

    The batch at position p is a pure function of (seed, p), so resumed runs see
    exactly the batches an uninterrupted run would.
    """

    def __init__(self, vocab_size=16, min_len=3, max_len=8, batch_size=16, seed=0):
        self.vocab_size = vocab_size
        self.min_len = min_len
        self.max_len = max_len
        self.batch_size = batch_size
        self.seed = seed
        perm_rng = np.random.default_rng(seed + 12345)
        self.mapping = np.arange(vocab_size)
        self.mapping[NUM_SPECIAL:] = NUM_SPECIAL + perm_rng.permutation(vocab_size - NUM_SPECIAL)

    def pairs(self, rng, n):
        out = []
        for _ in range(n):
            length = rng.integers(self.min_len, self.max_len + 1)
            src = rng.integers(NUM_SPECIAL, self.vocab_size, length)
            out.append((src, self.mapping[src[::-1]]))
        return out

    def make_batch(self, pairs):
        s_len = max(len(s) for s, _ in pairs)
        t_len = max(len(t) for _, t in pairs) + 1
        src = np.zeros([len(pairs), s_len], np.int32)
        tgt_in = np.zeros([len(pairs), t_len], np.int32)
        tgt_out = np.zeros([len(pairs), t_len], np.int32)
        for i, (s, t) in enumerate(pairs):
            src[i, :len(s)] = s
            tgt_in[i, :len(t) + 1] = np.concatenate([[BOS], t])
            tgt_out[i, :len(t) + 1] = np.concatenate([t, [EOS]])
        return {"src": src, "tgt_in": tgt_in, "tgt_out": tgt_out}

    def batch_at(self, position):
        rng = np.random.default_rng([self.seed, position])
        return self.make_batch(self.pairs(rng, self.batch_size))

    def __call__(self, position):
        p = int(position or 0)
        while True:
            yield self.batch_at(p), p + 1
            p += 1

    def eval_set(self, n=64, seed=None):
        rng = np.random.default_rng([self.seed if seed is None else seed, 10**9])
        return self.pairs(rng, n)
