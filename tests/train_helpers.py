"""A few Adam steps on a Seq2Seq, shared by the few-step training tests."""

import numpy as np
import tensorflow as tf

from acvi_tf.training.adam import Adam


def train_per_token(model, batch_at, steps, lr=0.02, seed=0):
    """Runs ``steps`` Adam steps on ``loss_terms(batch_at(i))`` (the objective per token);
    returns every term per token, one dict of floats per step."""
    opt = Adam(lr)
    # Every variable exists before the first trace (a tf.function that creates
    # variables is traced twice).
    model.build_for_checkpoint({k: tf.constant(v) for k, v in batch_at(0).items()})
    opt.build(model.trainable_variables)

    # Every dimension unknown: one trace serves every batch shape (reduce_retracing
    # alone traces the first shape, then again relaxed at the second).
    first = batch_at(0)
    signature = ({k: tf.TensorSpec([None] * np.ndim(v), tf.as_dtype(np.asarray(v).dtype))
                  for k, v in first.items()}, tf.TensorSpec([], tf.int32))

    @tf.function(input_signature=signature, autograph=False)
    def step(batch, s):
        with tf.GradientTape() as tape:
            terms = model.loss_terms(batch, training=True, seed=s)
            loss = terms["objective"] / terms["num_tokens"]
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return {k: v / terms["num_tokens"] for k, v in terms.items()}

    logs = []
    for i in range(steps):
        batch = {k: tf.constant(v) for k, v in batch_at(i).items()}
        logs.append({k: float(v) for k, v in step(batch, tf.constant(seed + i)).items()})
    return logs


def free_ports(n):
    """``n`` TCP ports free on localhost now (for a local multi-worker cluster)."""
    import socket
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports
