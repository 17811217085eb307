"""Learning-rate and mode schedules.

A *mode schedule* maps the global step to a dict of Python-level modes that
change the traced computation (e.g. ACVI's mixing switches from the weighted
average of Eq. 25 to the Gumbel-Softmax sample of Eq. 23 for the last 10% of
training). The trainer traces one step function per distinct mode, so the
switch costs one retrace, and a resumed run lands in the right mode because
modes depend on the step alone.

The KL annealing factor (:func:`kl_anneal_scale`) is not a mode: it changes every
step, so it is a tensor computed from the step inside the compiled step.
"""

import math

import keras

LR_DECAYS = ("none", "luong", "cosine")  # TrainConfig.lr_decay
KL_ANNEALING = ("linear", "sigmoid", "bahuleyan")
SIGMOID_STEEPNESS = 10.0  # logistic slope in units of 1 / anneal_steps (0.7% at the start)


def kl_anneal_scale(step, anneal_steps, kind="linear"):
    """KL cost annealing: the factor on every KL term's weight at ``step`` (a float32 tensor).

    Bowman et al., "Generating Sentences from a Continuous Space" (CoNLL 2016,
    Section 3.1): the KL weight starts at 0, so the decoder first learns to use
    the latent code, and rises to 1 (the true ELBO) over ``anneal_steps`` steps;
    Bahuleyan et al. (COLING 2018) train their VED and variational attention with
    it (their lambda_KL). With x = step / anneal_steps,

        linear:   min(1, x)
        sigmoid:  (s(x) - s(0)) / (s(1) - s(0)) for x < 1, else 1, with the logistic
                  s(x) = 1 / (1 + exp(-k (x - 1/2))), k = ``SIGMOID_STEEPNESS``:
                  Bowman et al.'s logistic schedule (Bahuleyan et al.'s code uses
                  the same curve written as (tanh(.) + 1) / 2), rescaled to start
                  at exactly 0 and reach exactly 1 at ``anneal_steps``.
        bahuleyan: Bahuleyan et al.'s code (tf-var-attention, ``ved_varAttn.py``) as it
                  runs: lambda = (tanh((n - 4500) / 1000) + 1) / 2 after iteration n,
                  updated only while n <= 3000, so it rises from 1.2e-4 and stays at
                  0.047 from iteration 3000 on: never near 1. Written for any
                  ``anneal_steps`` N (3000 in their code) as
                  (tanh((min(step, N) - 1.5 N) / (N / 3)) + 1) / 2.

    ``anneal_steps`` <= 0 turns annealing off (always 1). ``step`` may be a
    Python number or a tensor (the trainer passes the global step tensor, so the
    compiled step is traced once and a resumed run continues from its step).
    """
    import tensorflow as tf
    if kind not in KL_ANNEALING:
        raise ValueError(f"kl_anneal={kind!r}: choose one of {', '.join(KL_ANNEALING)}")
    if anneal_steps <= 0:
        return tf.constant(1.0, tf.float32)
    x = tf.cast(step, tf.float32) / float(anneal_steps)
    x = tf.clip_by_value(x, 0.0, 1.0)
    if kind == "linear":
        return x
    if kind == "bahuleyan":  # x already stops at 1: their lambda freezes at iteration N
        return (tf.tanh((x - 1.5) * 3.0) + 1.0) / 2.0
    k = SIGMOID_STEEPNESS
    low = 1.0 / (1.0 + math.exp(0.5 * k))
    high = 1.0 / (1.0 + math.exp(-0.5 * k))
    scale = (tf.sigmoid(k * (x - 0.5)) - low) / (high - low)
    return tf.where(x >= 1.0, 1.0, tf.clip_by_value(scale, 0.0, 1.0))


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


COSINE_FINAL_FRACTION = 0.1  # the cosine schedule ends at this fraction of the peak rate


def warmup_cosine_schedule(peak, total_steps, warmup_steps=0, final_fraction=COSINE_FINAL_FRACTION):
    """Linear warm-up from 0 to ``peak`` over ``warmup_steps``, then cosine decay to
    ``final_fraction * peak`` at ``total_steps`` (and constant after):

        lr(t) = peak * t / W                                        for t < W
        lr(t) = peak * (f + (1 - f) (1 + cos(pi (t - W) / (T - W))) / 2)   for W <= t <= T

    (Loshchilov & Hutter's cosine annealing, with the warm-up of Goyal et al.; Keras'
    ``CosineDecay``)."""
    warmup_steps = int(warmup_steps)
    if not 0 <= warmup_steps < int(total_steps):
        raise ValueError(f"warmup_steps={warmup_steps} must be below train_steps="
                         f"{total_steps}")
    return keras.optimizers.schedules.CosineDecay(
        0.0 if warmup_steps else float(peak), decay_steps=int(total_steps) - warmup_steps,
        alpha=float(final_fraction), warmup_target=float(peak) if warmup_steps else None,
        warmup_steps=warmup_steps)


def luong_sgd_schedule(initial, total_steps, num_decays=4):
    """nmt's luong234: start decaying at 2/3 of training, ``num_decays`` halvings."""
    start = int(total_steps * 2 / 3)
    return StepDecay(initial, start, max(1, (total_steps - start) // num_decays),
                     0.5, num_decays - 1)


class ModeSchedule:
    """Modes as a function of the step: ``modes(step) -> dict``.

    ``gumbel_fraction``: ACVI switches to Gumbel-Softmax mixing (Eq. 23) for the
    last fraction of ``total_steps`` (0.1 in the ICLR version); 0 disables it.

    In summarization ``total_steps`` counts the coverage steps too, so at paper scale
    the Gumbel tail is the last 25,300 of 253,000 steps: it starts at 227,700, inside
    Table 5's phase 5 (223K-250K), and the 3K coverage steps from 250,000 run with
    Gumbel mixing on. That is the paper's order: the ICLR version (Sec. 3) uses
    Gumbel-Softmax "for the last 10% of the model training iterations", and Appendix A
    counts the coverage steps as "a final 3K iterations of model training", so the last
    10% ends with coverage and cannot come before it. (The other reading, 10% of the
    250K phase steps, 225,000-250,000, would switch Gumbel off again for coverage,
    which is not "the last" iterations.) :func:`milestones` lists the order.
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
    def fit(cls, train_steps, coverage_steps, max_enc_steps, max_dec_steps, phases=True,
            phase_steps=None):
        """Table 5 laid over ``train_steps``: the five phases, in the paper's
        proportions, fill the first ``train_steps - coverage_steps`` steps and end at
        ``max_enc_steps`` / ``max_dec_steps`` (the paper's 400 / 100 scaled), then
        ``coverage_steps`` with coverage on. ``phases=False``: one phase at the final
        lengths (no curriculum). With the paper's numbers this is Table 5 exactly.
        ``phase_steps``: the five phases fill the first ``phase_steps`` steps instead and
        the last one (the final lengths) runs on to the coverage steps, so a longer run
        repeats a shorter run's curriculum step for step and then continues it.
        """
        body = int(train_steps) - int(coverage_steps)
        if body < 1:
            raise ValueError(f"train_steps={train_steps} leaves no step before the "
                             f"{coverage_steps} coverage steps")
        if not phases:
            return cls([(body, max_enc_steps, max_dec_steps)], coverage_steps)
        span = body if phase_steps is None else int(phase_steps)
        if not 1 <= span <= body:
            raise ValueError(f"phase_steps={phase_steps} must be between 1 and the {body} "
                             f"steps before coverage")
        end, enc, dec = PAPER_SUMMARIZATION_PHASES[-1]
        s = cls(PAPER_SUMMARIZATION_PHASES, 0).scaled(
            span / end, max_enc_steps / enc, min_length=min(4, max_enc_steps, max_dec_steps),
            dec_length_scale=max_dec_steps / dec)
        phases = list(s.phases)
        phases[-1] = (body, max_enc_steps, max_dec_steps)  # exact, whatever the rounding
        if len(phases) > 1 and phases[-2][0] >= body:
            raise ValueError(f"train_steps={train_steps} is too few for five phases")
        return cls(phases, coverage_steps)


def milestones(mode_schedule, phases=None):
    """``[(step, what)]``, sorted by step: where the training of a run changes, from the
    ``ModeSchedule`` (the Gumbel-Softmax tail) and the summarization ``PhaseSchedule``
    ``phases`` (each phase's lengths, then coverage). The summarization task logs it, so
    a run says in which order its Gumbel tail and its coverage phase come."""
    out = []
    if phases is not None:
        start = 0
        for i, (end, enc, dec) in enumerate(phases.phases):
            out.append((start, f"phase {i + 1}: max {enc} encoder / {dec} decoder steps"))
            start = end
        if phases.coverage_steps:
            out.append((start, f"coverage on (the last {phases.coverage_steps:,} steps)"))
    if mode_schedule.gumbel_fraction > 0:
        out.append((mode_schedule.gumbel_start(),
                    f"Gumbel-Softmax mixing (Eq. 23, the last "
                    f"{mode_schedule.gumbel_fraction:.0%} of {mode_schedule.total_steps:,} "
                    f"steps)"))
    out.append((mode_schedule.total_steps, "end of training"))
    return sorted(out, key=lambda m: m[0])
