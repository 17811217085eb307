"""The training run's settings: :class:`TrainConfig`, every hyper-parameter of the loop,
one declaration each (a field with help is a flag of the task CLIs:
:mod:`acvi_tf.utils.settings`)."""

import dataclasses
import os

from acvi_tf.training import schedules
from acvi_tf.utils import manifest
from acvi_tf.utils.files import save_json
from acvi_tf.utils.settings import setting

OPTIMIZERS = ("adam", "sgd")  # TrainConfig.optimizer: make_optimizer builds these


@dataclasses.dataclass
class TrainConfig:
    """Every hyper-parameter of the loop, one declaration each (a field with help is a
    flag of the task CLIs: :mod:`acvi_tf.utils.settings`)."""
    model_dir: str                     # checkpoints, TensorBoard logs, decodes go here
    train_steps: int = setting(1000, "Optimiser steps.", lower_bound=0)
    optimizer: str = setting("adam", "Optimiser.", choices=OPTIMIZERS)  # Adam: its defaults
    learning_rate: float = setting(1e-3, "Initial learning rate.", lower_bound=0.0)
    lr_decay: str = setting(
        "none", "luong: halve the SGD rate 4 times in the last third; cosine (any "
        "optimizer): linear warm-up over --warmup_steps, then cosine decay to 10% of "
        "--learning_rate at --train_steps.", choices=schedules.LR_DECAYS)
    warmup_steps: int = setting(0, "--lr_decay=cosine: steps of linear warm-up from 0.",
                                lower_bound=0)
    clip_norm: float = setting(5.0, "Global-norm gradient clipping (0: off).", lower_bound=0.0)
    seed: int = setting(0, "Run seed: parameters, data order, dropout, ACVI noise.",
                        lower_bound=0)
    deterministic: bool = setting(
        False, "tf.config.experimental.enable_op_determinism: bit-exact reruns and resumes "
        "(tested on CPU: two runs give the same weights); slower on GPU.")
    cpu_shards: int = setting(
        0, "Run each batch as this many concurrent shards of rows, one per CPU core, with one "
        "TensorFlow thread per op (faster than splitting every small op across threads: "
        "acvi_tf.utils.shards). 0: auto, one per usable core on a CPU-only machine whose "
        "TF_NUM_*_THREADS variables are unset and without --xla, else 1. The objective is the same; each "
        "shard draws its own dropout and noise.", lower_bound=0)
    jit_compile: bool = setting(False, "XLA-compile the training step (batches are padded "
                                "to --pad_multiple so few shapes are compiled).", flag="xla")
    log_every: int = setting(50, "Progress line / scalars every N steps.", lower_bound=1)
    eval_every: int = setting(500, "Validation every N steps (0: at the end only).",
                              lower_bound=0)
    checkpoint_every: int = setting(500, "Checkpoint every N steps.", lower_bound=1)  # + end
    checkpoint_minutes: float = setting(
        0.0, "Also checkpoint after any step that ends this many wall minutes after the last "
        "checkpoint (0: off), so that a run killed without warning (SIGKILL, a lost machine) "
        "redoes at most about this much; SIGTERM/SIGINT already save the step they stop at. "
        "One worker only.", lower_bound=0.0)
    keep_checkpoints: int = setting(3, "Checkpoints kept.", lower_bound=1)
    gumbel_fraction: float = setting(0.1, "ACVI: Gumbel-Softmax mixing (Eq. 23) for this "
                                     "last fraction of training.", lower_bound=0.0,
                                     upper_bound=1.0)
    kl_anneal_steps: int = setting(
        0, "KL cost annealing (Bowman et al. 2016): every KL term's weight is scaled by a "
        "factor rising from 0 to 1 over these first steps (0: off).", lower_bound=0)
    kl_anneal: str = setting("linear", "The KL annealing curve.",
                             choices=schedules.KL_ANNEALING)
    noise_warmup_steps: int = setting(
        0, "ACVI: the noise sigma * eps of the sampled context (Eq. 24) is scaled by a factor "
        "rising linearly from 0 to 1 over these first steps, so the decoder learns to read "
        "c_t before the noise arrives (0: off). The KL terms are those of the unscaled "
        "posterior.", lower_bound=0)
    progress: bool = setting(True, "A progress bar on stderr.")  # tqdm's
    init_from: str = setting(
        "", "Warm start: before the first step of a new run, copy every variable whose name "
        "and shape match from the latest checkpoint of this run directory (e.g. ACVI from a "
        "soft-attention run; ACVI's sigma-network stays freshly initialised). The "
        "vocabularies must be the same files.", flag_default=None)  # recorded in the run
    select_best: str = setting(
        "", "Best-validation checkpoint selection: keep the checkpoint whose evaluation "
        "during training scored best on this eval scalar (dev_bleu, val_rouge_1, ...; a "
        "leading '-' keeps the lowest, e.g. -dev_nll), and evaluate it on dev/test at the "
        "end instead of the last one (best.json names its step; results.json records it). "
        "Empty: the last checkpoint.", flag_default=None)

    def save(self, path):
        save_json(path, dataclasses.asdict(self))
        manifest.record(os.path.dirname(path) or ".", os.path.basename(path))
