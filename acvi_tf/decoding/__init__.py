"""In-graph, batched decoding: search strategies as pure functions of a decoder step function.

``step_fn(input_ids, state) -> (log_probs, new_state, extras)``; see
:mod:`acvi_tf.decoding.greedy` for the contract.
"""

from acvi_tf.decoding.beam import beam_search, length_penalty, tile_beam
from acvi_tf.decoding.greedy import greedy_search, never_emit

__all__ = ["beam_search", "best_hypothesis", "greedy_search", "length_penalty", "never_emit",
           "tile_beam"]


def best_hypothesis(out, beam_width):
    """The best hypothesis of a search output: ``ids`` [B, T], ``lengths`` [B],
    ``score`` [B] (beam search's ranking score, greedy search's summed
    log-probability) and ``attention`` [B, T, N] when the search gave it."""
    if beam_width > 1:
        best = {"ids": out["ids"][:, 0], "lengths": out["lengths"][:, 0],
                "score": out["scores"][:, 0]}
        if "attention" in out:
            best["attention"] = out["attention"][:, 0]
        return best
    best = {"ids": out["ids"], "lengths": out["lengths"], "score": out["log_prob"]}
    if "attention" in out:
        best["attention"] = out["attention"]
    return best
