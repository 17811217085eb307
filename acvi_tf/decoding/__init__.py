"""In-graph, batched decoding: search strategies as pure functions of a decoder step function.

``step_fn(input_ids, state) -> (log_probs, new_state, extras)``; see
:mod:`acvi_tf.decoding.greedy` for the contract.
"""

from acvi_tf.decoding.beam import beam_search, length_penalty, tile_beam
from acvi_tf.decoding.greedy import greedy_search, never_emit

__all__ = ["beam_search", "greedy_search", "length_penalty", "never_emit", "tile_beam"]
