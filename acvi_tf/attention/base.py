"""The context-variant contract every attention variant implements.

A context variant turns attention scores e_t into a context vector c_t:

* ``prepare(memory, mask, training, targets)`` runs once per source sequence and returns
  a dict of per-source tensors (ACVI computes log sigma^2(h_i) here);
* ``step(scores, memory_state, state, training)`` runs once per decoder step and
  returns ``(context, attention_probs, aux_losses, new_state)``.

``memory_state`` holds ``memory`` [B, N, D], ``mask`` [B, N] (bool), ``seed``
([2] int32, stateless), and whatever ``prepare`` returned under ``"variant"``.
``state`` holds ``time`` (a scalar int32 decoder step) and the variant's own
recurrent state from ``initial_state`` under ``"variant"``. Attention
probabilities always come back, because the pointer and coverage need them.
``aux_losses`` maps names (``kl``, ``reinforce``, ...) to per-example [B]
tensors; the model weights them by name (``loss_weights``) and logs them all.

A variant may defer part of its aux work until teacher forcing has run every
step: the per-step tensors named in ``deferred_names`` (returned in ``aux``,
leading axis B) are stacked over time to [B, T, ...] and handed to
``deferred_aux``, which returns per-example sums over the valid steps. Work
that does not feed the next decoder step (ACVI's Monte-Carlo KL) then runs as
one batched matrix product over all steps instead of T matrix-vector products,
and decoding, which never asks for aux losses, skips it.

A variant whose gradient estimator needs the output distribution at another context
(Deng et al.'s REINFORCE baseline, :mod:`acvi_tf.attention.variational`) names that
context, a deferred tensor [B, D] per step, in ``head_contexts``. Teacher forcing runs
the output head on it after the loop, on all steps at once as it does on c_t, and hands
``deferred_aux`` log P(y_t | that context) under ``<name>_target_log_prob`` and
log P(y_t | c_t) under ``target_log_prob`` ([B, T] each). A variant that feeds the next
decoder input another vector than c_t puts it in ``aux`` under the reserved key
``INPUT_FEED``.
"""

import keras

from acvi_tf.registry import Registry
from acvi_tf.utils.loop_gradients import contract

ATTENTION = Registry("attention variant")
register_attention = ATTENTION.register
INPUT_FEED = "input_feed"  # the reserved aux key: the next input's context (module docstring)
TARGET_LOG_PROB = "target_log_prob"  # deferred_aux's log P(y_t | c_t) (module docstring)
WEIGHTED_SUM = "bn,bnd->bd"  # c = sum_i w_i h_i (Eq. 3), as an einsum of (w, h)


class ContextVariant(keras.layers.Layer):
    """Base class. Subclasses override ``step`` and, if needed, ``prepare``.

    ``aux_loss_names`` lists the names ``step`` returns (so a training loop can
    allocate accumulators before tracing). ``loss_weights`` says how each enters
    the training loss; names with no weight are logged only. ``kl_names`` are the
    aux names that are KL divergences: KL cost annealing (Bowman et al. 2016; the
    trainer's ``kl_anneal_steps``) scales their weights, and only theirs (never a
    coverage, REINFORCE or likelihood term).
    """

    aux_loss_names = ()
    kl_names = ()            # the aux_loss_names that are KL terms (annealed)
    deferred_names = ()      # per-step tensors stacked for deferred_aux
    deferred_aux_names = ()  # the aux_loss_names that deferred_aux (not step) returns
    head_contexts = ()       # deferred_names of contexts the head scores the targets on too
    # True: Seq2Seq passes target_vocab_size, pad_id, unk_id and lstm_impl (an inference
    # network over the target ids owns its own embedding and BiLSTM).
    uses_target_vocab = False

    def __init__(self, memory_dim, **kwargs):
        super().__init__(**kwargs)
        self.memory_dim = memory_dim

    def loss_weights(self):
        return {}

    def set_mode(self, **mode):
        """Receives trainer schedule modes (e.g. ``acvi_mixing='gumbel'``) at trace time."""
        return None  # a docstring-only body trips AutoGraph when traced

    # The schedule modes a set_mode override reads (e.g. ``("acvi_mixing",)``). The
    # trainer traces its step once per combination of the modes the model reads, so a
    # variant that declares none is traced once across the ACVI Gumbel switch.
    modes = None

    def read_modes(self):
        """The schedule modes this variant's traced step depends on: none without a
        ``set_mode`` override, its declared :attr:`modes` with one, and ``None`` (every
        mode, the safe answer) for an override that declares nothing."""
        if type(self).set_mode is ContextVariant.set_mode:
            return ()
        return None if self.modes is None else tuple(self.modes)

    def prepare(self, memory, mask, training=False, targets=None):
        """Per-source work. ``targets`` ([B, T] ids) is given when the reference is
        known (training and validation loss), for variants with an inference
        network over the target; it is None while decoding."""
        return {}

    def initial_state(self, batch_size):
        return {}

    def step(self, scores, memory_state, state, training=False):
        raise NotImplementedError

    def loop_invariants(self, memory_state):
        """``{name: (equation, tensor)}``: the per-source tensors ``step`` reads linearly
        through :func:`weighted_sum` (or :func:`acvi_tf.utils.loop_gradients.contract`)
        under that name, whose gradient teacher forcing then sums after the loop. By
        default the memory h_i, as ``weighted_sum(w, memory, memory_state, "memory")``
        reads it; a step that reads it otherwise simply gets the per-step gradient."""
        return {"memory": (WEIGHTED_SUM, memory_state["memory"])}

    def deferred_aux(self, per_step, memory_state, step_mask):
        """Aux sums from the stacked ``deferred_names`` tensors ([B, T, ...] each) and
        ``step_mask`` [B, T] (1.0 for real target positions): ``{name: [B]}``. With
        ``head_contexts``, ``per_step`` also holds the head's target log-probabilities
        (module docstring)."""
        return {}

    def diagnostics(self, memory_state):
        """Per-source-position values ([B, N] each) the run diagnostics average over the
        real positions, e.g. ACVI's mean sigma. Default: none."""
        return {}

    def get_config(self):
        return {**super().get_config(), "memory_dim": self.memory_dim}


def weighted_sum(weights, memory, memory_state=None, name=None):
    """sum_i w_i h_i for weights [B, N] and memory [B, N, D].

    With the step's ``memory_state`` and the ``name`` under which the variant declared
    ``memory`` in ``loop_invariants``, teacher forcing sums ``memory``'s gradient after
    the loop (:mod:`acvi_tf.utils.loop_gradients`); the value is the same."""
    return contract(memory_state, name, WEIGHTED_SUM, weights, memory)
