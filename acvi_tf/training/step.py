"""The one training step: the Trainer runs it on every replica, the benchmark times it.

:func:`train_step` is one optimiser step in a replica context (the default context
outside a ``tf.distribute`` strategy): the per-token objective of
``model.loss_terms`` (every aux loss with its weight), gradients, global-norm
clipping of the summed gradient, and the update -- skipped when the loss or the
gradient norm is not finite (one replica), so the in-memory model stays good.
"""

import tensorflow as tf


def train_step(model, optimizer, batch, seed, clip_norm=5.0, anneal=None, num_replicas=1):
    """One step; returns the metrics (per-token terms, ``loss``, ``grad_norm``,
    ``tokens``, ``finite`` and the ``anneal`` values), reduced over the replicas."""
    anneal = anneal or {}
    ctx = tf.distribute.get_replica_context()
    with tf.GradientTape() as tape:
        terms = model.loss_terms(batch, training=True, seed=seed, **anneal)
        global_tokens = ctx.all_reduce(tf.distribute.ReduceOp.SUM, terms["num_tokens"])
        loss = terms["objective"] / tf.maximum(global_tokens, 1.0)
    variables = model.trainable_variables
    grads = tape.gradient(loss, variables)
    grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
             for g, v in zip(grads, variables)]
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

    if num_replicas == 1:
        def apply():
            optimizer.apply_gradients(zip(grads, variables))
            return tf.constant(True)
        # A non-finite step is not applied, so the in-memory model stays good too.
        tf.cond(ok, apply, lambda: tf.constant(False))
    else:
        # A synchronisation point cannot sit inside tf.cond across replicas. The host
        # still stops before any save, so the last good checkpoint is what remains.
        optimizer.apply_gradients(zip(grads, variables))
    metrics = {name: v / tf.maximum(global_tokens, 1.0) for name, v in terms.items()
               if name != "num_tokens"}
    metrics = {k: ctx.all_reduce(tf.distribute.ReduceOp.SUM, v) for k, v in metrics.items()}
    metrics["loss"] = total_loss
    metrics["grad_norm"] = grad_norm
    metrics["tokens"] = global_tokens
    metrics["finite"] = tf.cast(ok, tf.float32)
    metrics.update(anneal)  # the same on every replica, so their mean is the value
    return metrics
