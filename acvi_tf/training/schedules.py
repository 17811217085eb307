"""Learning-rate and mode schedules.

A *mode schedule* maps the global step to a dict of Python-level modes that
change the traced computation (e.g. ACVI's mixing switches from the weighted
average of Eq. 25 to the Gumbel-Softmax sample of Eq. 23 for the last 10% of
training). The trainer traces one step function per distinct mode, so the
switch costs one retrace, and a resumed run lands in the right mode because
modes depend on the step alone.
"""

import keras


class StepDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr = initial * decay_rate ** floor((step - start) / decay_steps) after ``start``.

    tensorflow/nmt's "luong234"-style SGD schedule: constant for the first
    ``start_decay_step`` steps, then halved every ``decay_steps``.
    """

    def __init__(self, initial, start_decay_step, decay_steps, decay_rate=0.5, num_decays=None):
        self.initial = float(initial)
        self.start_decay_step = int(start_decay_step)
        self.decay_steps = max(1, int(decay_steps))
        self.decay_rate = float(decay_rate)
        self.num_decays = num_decays

    def __call__(self, step):
        import tensorflow as tf
        step = tf.cast(step, tf.float32)
        n = tf.floor(tf.maximum(0.0, step - self.start_decay_step) / self.decay_steps)
        n = tf.where(step >= self.start_decay_step, n + 1.0, 0.0)
        if self.num_decays is not None:
            n = tf.minimum(n, float(self.num_decays))
        return self.initial * tf.pow(self.decay_rate, n)

    def get_config(self):
        return {"initial": self.initial, "start_decay_step": self.start_decay_step,
                "decay_steps": self.decay_steps, "decay_rate": self.decay_rate,
                "num_decays": self.num_decays}


def luong_sgd_schedule(initial, total_steps, num_decays=4):
    """nmt's luong234: start decaying at 2/3 of training, ``num_decays`` halvings."""
    start = int(total_steps * 2 / 3)
    return StepDecay(initial, start, max(1, (total_steps - start) // num_decays),
                     0.5, num_decays - 1)


class ModeSchedule:
    """Modes as a function of the step: ``modes(step) -> dict``.

    ``gumbel_fraction``: ACVI switches to Gumbel-Softmax mixing (Eq. 23) for the
    last fraction of ``total_steps`` (0.1 in the ICLR version); 0 disables it.
    """

    def __init__(self, total_steps, gumbel_fraction=0.1, extra=None):
        self.total_steps = int(total_steps)
        self.gumbel_fraction = float(gumbel_fraction)
        self.extra = extra  # optional callable step -> dict, for task schedules

    def gumbel_start(self):
        return int(round(self.total_steps * (1.0 - self.gumbel_fraction)))

    def modes(self, step):
        modes = {}
        if self.gumbel_fraction > 0 and step >= self.gumbel_start():
            modes["acvi_mixing"] = "gumbel"
        else:
            modes["acvi_mixing"] = "weighted"
        if self.extra is not None:
            modes.update(self.extra(step))
        return modes


# Appendix A, Table 5: (end iteration, max encoder steps, max decoder steps).
PAPER_SUMMARIZATION_PHASES = ((71_000, 10, 10), (116_000, 50, 50), (184_000, 100, 50),
                              (223_000, 200, 50), (250_000, 400, 100))
PAPER_COVERAGE_STEPS = 3_000


class PhaseSchedule:
    """The summarization curriculum: truncation lengths grow by phase, then coverage.

    ``phases`` are (end_step, max_enc_steps, max_dec_steps); after the last phase
    come ``coverage_steps`` more steps with coverage on (w_k trained, Eq. 9 in the
    loss) at the last phase's lengths. Everything is a function of the step, so
    a resumed run continues mid-phase.
    ``scaled(step_scale, length_scale)`` gives the CPU-scale version.
    """

    def __init__(self, phases=PAPER_SUMMARIZATION_PHASES, coverage_steps=PAPER_COVERAGE_STEPS):
        ends = [p[0] for p in phases]
        if ends != sorted(ends) or len(set(ends)) != len(ends):
            raise ValueError(f"phase end steps must increase: {ends}")
        self.phases = tuple(tuple(int(v) for v in p) for p in phases)
        self.coverage_steps = int(coverage_steps)

    @property
    def total_steps(self):
        return self.phases[-1][0] + self.coverage_steps

    def phase(self, step):
        """``dict(index, max_enc_steps, max_dec_steps, coverage)`` at ``step``."""
        for i, (end, enc, dec) in enumerate(self.phases):
            if step < end:
                return {"index": i, "max_enc_steps": enc, "max_dec_steps": dec, "coverage": False}
        _, enc, dec = self.phases[-1]
        return {"index": len(self.phases), "max_enc_steps": enc, "max_dec_steps": dec,
                "coverage": True}

    def modes(self, step):
        return {"coverage": self.phase(step)["coverage"]}

    def scaled(self, step_scale, length_scale=1.0, min_length=4, dec_length_scale=None):
        """Phase ends times ``step_scale``, encoder lengths times ``length_scale`` and
        decoder lengths times ``dec_length_scale`` (default: ``length_scale``)."""
        dec_scale = length_scale if dec_length_scale is None else dec_length_scale
        phases = [(max(1, int(round(end * step_scale))),
                   max(min_length, int(round(enc * length_scale))),
                   max(min_length, int(round(dec * dec_scale))))
                  for end, enc, dec in self.phases]
        for i in range(1, len(phases)):  # keep end steps strictly increasing after rounding
            if phases[i][0] <= phases[i - 1][0]:
                phases[i] = (phases[i - 1][0] + 1,) + phases[i][1:]
        return PhaseSchedule(phases, max(1, int(round(self.coverage_steps * step_scale))))

    @classmethod
    def fit(cls, train_steps, coverage_steps, max_enc_steps, max_dec_steps, phases=True):
        """Table 5 laid over ``train_steps``: the five phases, in the paper's
        proportions, fill the first ``train_steps - coverage_steps`` steps and end at
        ``max_enc_steps`` / ``max_dec_steps`` (the paper's 400 / 100 scaled), then
        ``coverage_steps`` with coverage on. ``phases=False``: one phase at the final
        lengths (no curriculum). With the paper's numbers this is Table 5 exactly.
        """
        body = int(train_steps) - int(coverage_steps)
        if body < 1:
            raise ValueError(f"train_steps={train_steps} leaves no step before the "
                             f"{coverage_steps} coverage steps")
        if not phases:
            return cls([(body, max_enc_steps, max_dec_steps)], coverage_steps)
        end, enc, dec = PAPER_SUMMARIZATION_PHASES[-1]
        s = cls(PAPER_SUMMARIZATION_PHASES, 0).scaled(
            body / end, max_enc_steps / enc, min_length=min(4, max_enc_steps, max_dec_steps),
            dec_length_scale=max_dec_steps / dec)
        phases = list(s.phases)
        phases[-1] = (body, max_enc_steps, max_dec_steps)  # exact, whatever the rounding
        if len(phases) > 1 and phases[-2][0] >= body:
            raise ValueError(f"train_steps={train_steps} is too few for five phases")
        return cls(phases, coverage_steps)
