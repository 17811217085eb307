"""Warm start (``--init_from=DIR``): copy every variable whose name and shape match.

E.g. ACVI from a trained soft-attention run: the encoder, decoder, score and head
weights are shared by name, ACVI's own sigma-network (Eq. 18) is absent from the
source and keeps its fresh initialisation.

Names are Keras variable paths with the layer-uniquifying suffixes that Keras adds when
several models are built in one process (``forward_lstm_1`` -> ``forward_lstm``) removed;
where that makes two paths equal, their order of creation tells them apart.
"""

import collections
import re

_SUFFIX = re.compile(r"_\d+$")


def canonical_names(variables):
    """Stable names for ``variables`` (see the module docstring), in the same order."""
    stripped = ["/".join(_SUFFIX.sub("", part) for part in v.path.split("/"))
                for v in variables]
    counts = collections.Counter(stripped)
    seen = collections.Counter()
    names = []
    for name in stripped:
        if counts[name] > 1:
            names.append(f"{name}#{seen[name]}")
            seen[name] += 1
        else:
            names.append(name)
    return names


def copy_matching(source, target):
    """Assigns each variable of ``target`` the value of the ``source`` variable with the
    same canonical name and shape. Both models must be built. Returns
    ``(loaded, skipped)``: the names copied, and ``{name: reason}`` for the target's
    variables left as they were (absent from the source, or another shape)."""
    by_name = dict(zip(canonical_names(source.variables), source.variables))
    loaded, skipped = [], {}
    for name, var in zip(canonical_names(target.variables), target.variables):
        src = by_name.get(name)
        if src is None:
            skipped[name] = "not in the source model"
        elif tuple(src.shape) != tuple(var.shape):
            skipped[name] = f"shape {tuple(src.shape)} in the source, {tuple(var.shape)} here"
        else:
            var.assign(src.value)
            loaded.append(name)
    return loaded, skipped
