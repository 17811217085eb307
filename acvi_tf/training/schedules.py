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
