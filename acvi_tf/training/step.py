"""The one training step: the Trainer runs it on every replica, the benchmark times it.

:func:`train_step` is one optimiser step in a replica context (the default context
outside a ``tf.distribute`` strategy): the per-token objective of
``model.loss_terms`` (every aux loss with its weight), gradients, global-norm
clipping of the summed gradient, and the update -- skipped when the loss or the
gradient norm is not finite (one replica), so the in-memory model stays good.

With ``keras.optimizers.LossScaleOptimizer`` (``precision="mixed_float16"``: float16's
range flushes small gradients to zero) the loss is scaled by the optimiser's dynamic
scale (``scale_loss``) before the gradients are taken, and the gradients are divided by
the same scale at once, so the norm, the clipping and the logged ``grad_norm`` are the
true gradient's. The optimiser's ``apply`` divides by its scale again, so it is handed
the clipped gradients times the scale (exact: the scale is a power of two); it skips a
step whose scaled gradients overflowed, halves the scale, and doubles it after
``dynamic_growth_steps`` good steps. Such an overflow is not a diverged step
(``finite`` stays 1); a non-finite loss is, and so is a non-finite gradient at a scale
already at :data:`MIN_LOSS_SCALE` or below (the gradient is not finite however it is
scaled: a NaN, or a loss exploding).
"""

import keras
import tensorflow as tf

from acvi_tf.utils.shards import shard_seed, summed

# Below this loss scale a non-finite gradient ends training (fairseq's DynamicLossScaler
# stops at the same minimum): from Keras' initial 2**15 that is 29 halvings in a row.
MIN_LOSS_SCALE = 1e-4


def loss_scale(optimizer):
    """The current loss scale of a (built) ``LossScaleOptimizer``; None for any other."""
    if not isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return None
    if not optimizer.built:
        raise ValueError("build the LossScaleOptimizer (optimizer.build(variables)) before "
                         "the first train_step: its loss scale is one of its variables")
    return tf.convert_to_tensor(optimizer.dynamic_scale)


def loss_terms(model, batch, seed, shards=1, **anneal):
    """``model.loss_terms(batch, training=True)``, every term a sum over rows, computed on
    ``shards`` consecutive row ranges of ``batch`` (:mod:`acvi_tf.utils.shards`), each
    with its own seed, and summed."""
    return summed(lambda part, i: model.loss_terms(part, training=True,
                                                   seed=shard_seed(seed, i), **anneal),
                  batch, shards)


def train_step(model, optimizer, batch, seed, clip_norm=5.0, anneal=None, num_replicas=1,
               shards=1):
    """One step; returns the metrics (per-token terms, ``loss``, ``grad_norm``,
    ``tokens``, ``finite``, the ``anneal`` values and, with loss scaling, the
    ``loss_scale`` the step used), reduced over the replicas. ``shards`` > 1 computes
    the objective on that many row ranges of the batch side by side (:func:`loss_terms`)."""
    anneal = anneal or {}
    ctx = tf.distribute.get_replica_context()
    scale = loss_scale(optimizer)
    with tf.GradientTape() as tape:
        terms = loss_terms(model, batch, seed, shards, **anneal)
        global_tokens = ctx.all_reduce(tf.distribute.ReduceOp.SUM, terms["num_tokens"])
        loss = terms["objective"] / tf.maximum(global_tokens, 1.0)
        scaled_loss = loss if scale is None else optimizer.scale_loss(loss)
    variables = model.trainable_variables
    grads = tape.gradient(scaled_loss, variables)
    grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
             for g, v in zip(grads, variables)]
    if scale is not None:  # the true gradients: the norm and the clipping act on them
        grads = [g / scale for g in grads]
    if num_replicas > 1:
        # Clip the norm of the *summed* gradient; Keras sums the replicas' gradients
        # again in apply_gradients, hence the division.
        grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
    grad_norm = tf.linalg.global_norm(grads)
    if clip_norm > 0:
        grads, _ = tf.clip_by_global_norm(grads, clip_norm, use_norm=grad_norm)
    if num_replicas > 1:
        grads = [g / num_replicas for g in grads]
    total_loss = ctx.all_reduce(tf.distribute.ReduceOp.SUM, loss)
    ok = tf.math.is_finite(total_loss) & tf.math.is_finite(grad_norm)
    apply_if = ok
    if scale is not None:
        grads = [g * scale for g in grads]  # LossScaleOptimizer.apply unscales them
        # It skips an overflowed step itself (and halves the scale); only a non-finite
        # loss stops it being called, and only a scale at the minimum makes it diverged.
        apply_if = tf.math.is_finite(total_loss)
        ok = apply_if & (tf.math.is_finite(grad_norm) | (scale > MIN_LOSS_SCALE))

    if num_replicas == 1 and not tf.distribute.has_strategy():
        def apply():
            optimizer.apply_gradients(zip(grads, variables))
            return tf.constant(True)
        # A non-finite step is not applied, so the in-memory model stays good too.
        tf.cond(apply_if, apply, lambda: tf.constant(False))
    else:
        # A synchronisation point cannot sit inside tf.cond under a tf.distribute
        # strategy, even with one replica (apply_gradients' merge_call). The host still
        # stops before any save, so the last good checkpoint is what remains.
        optimizer.apply_gradients(zip(grads, variables))
    metrics = {name: v / tf.maximum(global_tokens, 1.0) for name, v in terms.items()
               if name != "num_tokens"}
    metrics = {k: ctx.all_reduce(tf.distribute.ReduceOp.SUM, v) for k, v in metrics.items()}
    metrics["loss"] = total_loss
    metrics["grad_norm"] = grad_norm
    metrics["tokens"] = global_tokens
    metrics["finite"] = tf.cast(ok, tf.float32)
    if scale is not None:
        metrics["loss_scale"] = scale  # the same on every replica
    metrics.update(anneal)  # the same on every replica, so their mean is the value
    return metrics
