"""Gradients of the per-source tensors that every decoder step reads, summed after the loop.

Teacher forcing reads the same per-source tensors X at every decoder step t, each
through a product that is linear in X:

* the context c_t = sum_i a_t^i h_i (Eq. 3): ``"bn,bnd->bd"`` of (a_t, h);
* Luong's general score e_t^i = (W h_i)^T s_t (Eq. 10): ``"bd,bnd->bn"`` of (s_t, W h);
* ACVI's noise scale sum_i (a_t^i)^2 sigma_i^2 (Eq. 25): ``"bn,bnd->bd"`` of (a_t^2, sigma^2).

TensorFlow's while-loop gradient adds each step's gradient of X, a [B, N, D] outer
product, into an accumulator at every step: T products and T additions of [B, N, D]
tensors, memory traffic that costs soft attention (h and W h) and ACVI (also sigma^2)
a large share of their step (``results/bench_profile.md``). Since y_t = einsum(w_t, X) is
linear in X, the gradient is also

    dL/dX = sum_t einsum(w_t, dL/dy_t)  (the adjoint equation),

one batched product over the stacked w_t and dL/dy_t after the loop. :class:`LoopGradients`
arranges that: inside the loop the step computes y_t from ``stop_gradient(X)`` (so the
loop's gradient still reaches w_t, but never accumulates one for X) plus a zero z_t, read
from a TensorArray of zeros whose custom gradient takes the stacked dL/dz_t = dL/dy_t and
returns the batched product above as X's gradient. The values are unchanged (z_t = 0);
the gradients are equal up to floating-point summation order (``tests/utils``).

The step code asks for such a product with :func:`contract` and ``memory_state``;
without a :class:`LoopGradients` in ``memory_state`` (decoding, evaluation, a variant or
score that did not declare the tensor) it is the plain ``einsum``.

Beam search meets the same products from the other side: it tiles every per-source
tensor K times (row b*K + k a copy of row b), and the step's products read all K copies.
A :class:`SharedRows` in ``memory_state`` lets :func:`contract` read the untiled tensor
once per batch element instead, with the K rows' weights as one [K, ...] operand: one
small matrix product per element in place of K matrix-vector products over K copies.
"""

import tensorflow as tf

# The key of a LoopGradients in a decoder step's memory_state (teacher forcing only).
LOOP_KEY = "loop_gradients"
# The key of a SharedRows in a beam-search step's memory_state.
SHARED_ROWS_KEY = "shared_rows"


def _axes(equation):
    """(w, x, y) axes of ``"w,x->y"``, checked: w's and y's axes are among x's (so their
    shapes follow from X's), each of x's is in w or y, and ``t`` is free for the steps."""
    inputs, y = equation.split("->")
    w, x = inputs.split(",")
    if ("t" in equation or not set(y) <= set(x) or not set(w) <= set(x)
            or not set(x) <= set(w) | set(y)):
        raise ValueError(f"{equation!r}: want 'w,x->y' with w's and y's axes among x's, "
                         f"each of x's in w or y, and no 't'")
    return w, x, y


def _shape_of(axes, x_axes, value):
    """The dynamic shape of a tensor with ``axes``, each sized as in ``value`` ([x_axes])."""
    shape = tf.shape(value)
    return [shape[x_axes.index(a)] for a in axes]


def adjoint(equation):
    """The equation of X's gradient for ``y = einsum(equation, w, X)`` summed over a new
    leading step axis ``t``: ``"bn,bnd->bd"`` -> ``"tbn,tbd->bnd"``."""
    w, x, y = _axes(equation)
    return f"t{w},t{y}->{x}"


def tensors_only(memory_state):
    """``memory_state`` without its :class:`LoopGradients` or :class:`SharedRows` (for
    Keras layers' calls)."""
    if LOOP_KEY not in memory_state and SHARED_ROWS_KEY not in memory_state:
        return memory_state
    return {k: v for k, v in memory_state.items() if k not in (LOOP_KEY, SHARED_ROWS_KEY)}


class SharedRows:
    """The per-source tensors of a memory_state tiled ``group`` times by row (beam search:
    row b * K + k is a copy of row b), kept with their untiled originals.

    ``contract(name, equation, weights, value)`` computes ``einsum(equation, weights,
    value)`` for the tiled ``value`` from the untiled one: the weights of each group of
    K rows become one operand, ``"bd,bnd->bn"`` becomes ``"bkd,bnd->bkn"``. It applies
    only when ``value`` is the very tensor tiled under ``name`` and the equation's first
    axis is the batch in all three places; otherwise None (the caller's plain product)."""

    def __init__(self, group, untiled, tiled):
        self.group = group
        self._untiled = {k: v for k, v in untiled.items() if tf.is_tensor(v)}
        self._tiled = {k: v for k, v in tiled.items() if k in self._untiled}

    def contract(self, name, equation, weights, value):
        if name is None or self._tiled.get(name) is not value:
            return None
        w, x, y = _axes(equation)
        if not (w[:1] == x[:1] == y[:1] == "b"):
            return None
        free = next(c for c in "kjmpqrsuvxyz" if c not in equation)
        untiled = self._untiled[name]
        grouped = tf.reshape(tf.cast(weights, untiled.dtype),
                             tf.concat([[-1, self.group], tf.shape(weights)[1:]], 0))
        out = tf.einsum(f"b{free}{w[1:]},{x}->b{free}{y[1:]}", grouped, untiled)
        return tf.reshape(out, tf.concat([[-1], tf.shape(out)[2:]], 0))


def contract(memory_state, name, equation, weights, value):
    """``einsum(equation, weights, value)``; inside a teacher-forced loop whose
    ``memory_state`` carries a :class:`LoopGradients` that declared ``name``, with
    ``value``'s gradient summed after the loop; in a beam search whose ``memory_state``
    carries a :class:`SharedRows`, from the untiled ``value``."""
    loop = None if memory_state is None else memory_state.get(LOOP_KEY)
    if loop is not None and name in loop:
        return loop.contract(name, weights)
    shared = None if memory_state is None else memory_state.get(SHARED_ROWS_KEY)
    if shared is not None:
        out = shared.contract(name, equation, weights, value)
        if out is not None:
            return out
    return tf.einsum(equation, tf.cast(weights, value.dtype), value)


class LoopGradients:
    """The deferred gradients of one teacher-forced loop (module docstring).

    Before the loop: build it with ``invariants`` ``{name: (equation, tensor)}`` (or
    :meth:`declare` them one by one); then :meth:`initial_arrays` gives the TensorArrays
    the loop carries. In the loop body: :meth:`begin` with the step index, the step's
    :func:`contract` calls, then :meth:`write`. After the loop: :meth:`finish` with the
    final arrays. With nothing declared every call is a no-op and :func:`contract` is the
    plain product, so one loop body serves both. Build a new one per loop: it holds the
    loop's tensors.
    """

    def __init__(self, length, invariants=None):
        self.length = length
        self._declared = {}   # name -> (equation, stop_gradient(value), zeros TensorArray)
        self._stacked = {}    # name -> the stacked w_t, set by finish(); read by the gradient
        self._t = None        # the index of the step being traced
        self._weights = {}    # name -> w_t recorded by the step being traced
        for name, (equation, value) in (invariants or {}).items():
            self.declare(name, equation, value)

    def __contains__(self, name):
        return name in self._declared

    def declare(self, name, equation, value):
        """``value`` (a per-source tensor, e.g. [B, N, D]) enters every step as
        ``einsum(equation, w_t, value)``; its gradient through those products is
        computed after the loop."""
        if name in self._declared:
            raise ValueError(f"loop gradient {name!r} declared twice")
        backward = adjoint(equation)
        _, x_axes, y_axes = _axes(equation)
        y_shape = tf.stack([self.length] + _shape_of(y_axes, x_axes, value))

        @tf.custom_gradient
        def zeros_of(x):
            def grad(dz):
                if name not in self._stacked:
                    raise RuntimeError("LoopGradients.finish(arrays) was not called after "
                                       "the loop: the gradient needs the stacked weights")
                w = tf.stop_gradient(self._stacked[name])
                return tf.einsum(backward, tf.cast(w, dz.dtype), dz)
            return tf.zeros(y_shape, x.dtype), grad

        zeros = tf.TensorArray(value.dtype, size=self.length).unstack(zeros_of(value))
        self._declared[name] = (equation, tf.stop_gradient(value), zeros)

    def initial_arrays(self):
        """The TensorArrays of the w_t, one per declared name (loop variables)."""
        return {name: tf.TensorArray(x.dtype, size=self.length)
                for name, (_, x, _) in self._declared.items()}

    def begin(self, t):
        """Starts step ``t``: :meth:`contract` reads that step's z_t (all zeros)."""
        self._t = t
        self._weights = {}

    def contract(self, name, weights):
        if self._t is None:
            raise RuntimeError("LoopGradients.contract outside begin(t) ... write(t)")
        if name in self._weights:
            raise ValueError(f"loop gradient {name!r} contracted twice in one step")
        equation, value, zeros = self._declared[name]
        weights = tf.cast(weights, value.dtype)
        self._weights[name] = weights
        return tf.einsum(equation, weights, value) + zeros.read(self._t)

    def write(self, t, arrays):
        """The arrays with this step's w_t written; a name the step did not contract gets
        zeros (an unwritten TensorArray loop variable does not compile under XLA)."""
        out = {name: a.write(t, self._weights[name] if name in self._weights
                             else self._zero_weights(name))
               for name, a in arrays.items()}
        self._t, self._weights = None, {}
        return out

    def _zero_weights(self, name):
        equation, value, _ = self._declared[name]
        w_axes, x_axes, _ = _axes(equation)
        return tf.zeros(tf.stack(_shape_of(w_axes, x_axes, value)), value.dtype)

    def finish(self, arrays):
        """Stacks the w_t ([T, ...]) that each name's gradient reads."""
        for name, a in arrays.items():
            self._stacked[name] = a.stack()
