"""FLOPs of a training step: the analytic matmul count of a model config, and the dot
FLOPs of an XLA-optimised HLO module (each while-loop body times its trip count), the
dump of that HLO, and the FLOP fields of ``make bench``'s records.
See :mod:`benchmarks.bench` for how the benchmark uses them."""

import math
import os
import re

from benchmarks.output import error_text

BASELINE = "soft"  # the variant whose FLOPs the analytic count fully knows
DUMP_MODULE_PREFIX = "bench_train_step"


def analytic_flops(config, batch, src_len, tgt_len):
    """Matmul FLOPs of one training step of a ``ModelConfig``, by hand (the fallback).

    Forward matmuls (2 m k n each), x3 for forward + backward (each forward
    product has two backward products of the same size: d input, d weight):

    * encoder, per layer and direction: N steps of 2 B (in + U) 4U (LSTM gates);
    * bridge: 2 B (2U) S for h and c of every decoder layer;
    * score keys once per source: 2 B N (2U) A (A = attention_units for the
      additive score, decoder_units for the multiplicative one);
    * per decoder step (T of them): LSTM layer 0 2 B (E + 2U + S) 4S (input
      feeding), further layers 2 B (2S) 4S; score 2 B S A (additive W_s s_t; its
      v^T tanh(.) is elementwise) or 2 B N S (multiplicative); context 2 B N (2U);
      head 2 B (S + 2U) H + 2 B H V;
    * variant extras from ``VARIANT_FLOPS`` (ACVI: the sigma network over B N
      memory states); an unknown variant adds nothing (``complete`` is False).

    B includes the ``num_samples`` tiling. Returns ``(flops, complete)``.
    """
    c = config
    b = batch * max(1, c.num_samples)
    n, t = src_len, tgt_len
    if getattr(c, "model", "seq2seq") == "transformer":
        return 3 * _transformer_forward_flops(c, b, n, t), True
    u, d, s = c.encoder_units, 2 * c.encoder_units, c.decoder_units
    fwd = 0
    width = c.embed_dim if c.src_vocab_size else c.feature_dim
    for _ in range(c.encoder_layers):
        fwd += 2 * n * 2 * b * (width + u) * 4 * u
        width = d
    fwd += c.decoder_layers * 2 * (2 * b * d * s)
    a = c.attention_units if c.score == "additive" else s
    fwd += 2 * b * n * d * a
    step = 2 * b * (c.embed_dim + d + s) * 4 * s
    step += (c.decoder_layers - 1) * 2 * b * (2 * s) * 4 * s
    step += 2 * b * s * a if c.score == "additive" else 2 * b * n * s
    step += 2 * b * n * d
    step += 2 * b * (s + d) * c.head_units + 2 * b * c.head_units * c.tgt_vocab_size
    fwd += t * step
    extra = VARIANT_FLOPS.get(c.attention)
    if extra is not None:
        fwd += extra(c, b, n, t)
    return 3 * fwd, extra is not None or c.attention == BASELINE


def _transformer_forward_flops(c, b, n, t):
    """Forward matmuls of the Transformer: per encoder layer the Q/K/V/O projections,
    the two attention products and the feed-forward pair; per decoder layer the same for
    self-attention plus cross-attention (Q/O over T, K/V over N); then the output layer."""
    e, f = c.embed_dim, c.ff_units

    def layer(q_len, kv_len, own_kv=True):
        proj = 2 * b * q_len * e * e * 2 + (2 * b * kv_len * e * e * 2 if own_kv else 0)
        return proj + 2 * 2 * b * q_len * kv_len * e

    per_encoder = layer(n, n) + 2 * 2 * b * n * e * f
    per_decoder = layer(t, t) + layer(t, n) + 2 * 2 * b * t * e * f
    return (c.transformer_layers * (per_encoder + per_decoder)
            + 2 * b * t * e * c.tgt_vocab_size)


def _acvi_flops(config, b, n, t):
    """ACVI's log sigma^2 network over the B N memory states (Eq. 18), once per source."""
    d = 2 * config.encoder_units
    layers = 2 if config.attention_options.get("sigma_net", "mlp") == "mlp" else 1
    return layers * 2 * b * n * d * d


VARIANT_FLOPS = {"acvi": _acvi_flops}


_HEADER = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_DIMS = re.compile(r"^\w+\[([\d,]*)\]")
_CALL_ONE = re.compile(r"\b(calls|body|condition|to_apply|true_computation|false_computation)"
                       r"=%?([\w.\-]+)")
_CALL_MANY = re.compile(r"\b(calls|branch_computations|called_computations)=\{([^}]*)\}")
_TRIP = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_BODY_ID = re.compile(r"while_body_(\d+)(_grad_)?")


def _split_shape(rest):
    """``'f32[2,3]{1,0} dot(...)'`` -> ``('f32[2,3]{1,0}', 'dot(...)')``; tuples too."""
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0:
                return rest[:i + 1], rest[i + 1:].lstrip()
    shape, _, remainder = rest.partition(" ")
    return shape, remainder


def _dims(shape):
    m = _DIMS.match(shape)
    return [int(x) for x in m.group(1).split(",") if x] if m else None


def _operands(call_text):
    """The text inside the op's outermost parentheses and what follows it."""
    depth = 0
    for i, ch in enumerate(call_text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and ch == ")":
            start = call_text.index("(")
            return call_text[start + 1:i], call_text[i + 1:]
    return call_text, ""


def hlo_dot_flops(hlo_text):
    """Dot FLOPs of an HLO module's text, loop bodies times their trip counts.

    Returns a dict: ``flops`` (None if a loop containing dots has no resolvable
    trip count), ``loops`` (how many while loops, and how their counts were
    found) and ``dots``.
    """
    comps, entry, current = {}, None, None
    shapes = {}
    for line in hlo_text.splitlines():
        if not line.strip() or line.startswith("HloModule"):
            continue
        if not line[0].isspace():
            if line.strip() == "}":
                current = None
                continue
            m = _HEADER.match(line)
            if m and line.rstrip().endswith("{"):
                current = m.group(1)
                comps[current] = {"dots": 0, "calls": [], "num_dots": 0}
                if line.startswith("ENTRY"):
                    entry = current
            continue
        if current is None:
            continue
        m = _INSTR.match(line)
        if not m:
            continue
        name, rest = m.groups()
        shape, remainder = _split_shape(rest)
        shapes[name] = shape
        op = remainder.split("(", 1)[0].strip()
        comp = comps[current]
        if op == "dot":
            operand_text, attrs = _operands(remainder)
            out = _dims(shape)
            lhs_inline = re.match(r"\s*(\w+\[[\d,]*\])", operand_text)
            lhs_name = re.search(r"%([\w.\-]+)", operand_text)
            lhs = _dims(lhs_inline.group(1)) if lhs_inline else (
                _dims(shapes.get(lhs_name.group(1), "")) if lhs_name else None)
            contracting = re.search(r"lhs_contracting_dims=\{([\d,]*)\}", attrs)
            if out is None or lhs is None or contracting is None:
                raise ValueError(f"cannot size this dot: {line.strip()[:200]}")
            k = math.prod(lhs[int(i)] for i in contracting.group(1).split(",") if i)
            comp["dots"] += 2 * math.prod(out) * k
            comp["num_dots"] += 1
        if op == "while":
            body = re.search(r"\bbody=%?([\w.\-]+)", remainder).group(1)
            cond = re.search(r"\bcondition=%?([\w.\-]+)", remainder).group(1)
            trip = _TRIP.search(remainder)
            comp["calls"].append(("while", body, cond, int(trip.group(1)) if trip else None))
            continue
        for _, callee in _CALL_ONE.findall(remainder):
            comp["calls"].append(("call", callee, None, 1))
        for _, group in _CALL_MANY.findall(remainder):
            for callee in re.findall(r"%?([\w.\-]+)", group):
                comp["calls"].append(("call", callee, None, 1))

    # Trip counts of TF gradient loops: those of the forward loop they differentiate.
    forward_trips = {}
    for comp in comps.values():
        for kind, body, _, trip in comp["calls"]:
            m = _BODY_ID.search(body) if kind == "while" else None
            if m and not m.group(2) and trip is not None:
                forward_trips.setdefault(m.group(1), set()).add(trip)
    loops = {"total": 0, "known_trip_count": 0, "from_forward_loop": 0,
             "unresolved_without_dots": 0, "unresolved_with_dots": 0}
    memo = {}

    def total(name):
        if name in memo:
            return memo[name]
        memo[name] = 0  # guards against (impossible) recursion
        comp = comps.get(name)
        if comp is None:
            return 0
        flops = comp["dots"]
        for kind, callee, cond, trip in comp["calls"]:
            inner = total(callee)
            if kind == "while":
                loops["total"] += 1
                inner += total(cond)
                if trip is not None:
                    loops["known_trip_count"] += 1
                else:
                    m = _BODY_ID.search(callee)
                    trips = forward_trips.get(m.group(1), set()) if m and m.group(2) else set()
                    if len(trips) == 1:
                        trip = trips.pop()
                        loops["from_forward_loop"] += 1
                    elif inner == 0:
                        trip = 0
                        loops["unresolved_without_dots"] += 1
                    else:
                        loops["unresolved_with_dots"] += 1
                        trip = math.nan
            flops += trip * inner
        memo[name] = flops
        return flops

    if entry is None:
        raise ValueError("no ENTRY computation in the HLO text")
    flops = total(entry)
    return {"flops": None if math.isnan(flops) else int(flops), "loops": loops,
            "dots": sum(c["num_dots"] for c in comps.values())}


def dumped_hlo(dump_dir, module_name):
    """The text of the optimised HLO dumped for a module, or None."""
    if not dump_dir or not os.path.isdir(dump_dir):
        return None
    # TF names the module after the function plus "_<uid>__".
    pattern = re.compile(re.escape(module_name) + r"_\d+__.*after_optimizations\.txt$")
    found = [f for f in os.listdir(dump_dir) if pattern.search(f)]
    if not found:
        return None
    path = max((os.path.join(dump_dir, f) for f in found), key=os.path.getsize)
    with open(path) as f:
        return f.read()


def module_name(size_name, variant):
    """The name of a timed step function, and so of its XLA module in the HLO dump."""
    return re.sub(r"\W", "_", f"{DUMP_MODULE_PREFIX}_{size_name}_{variant}")


def xla_dump_flags(existing, dump_dir):
    """``XLA_FLAGS`` that add dumping the timed steps' optimised HLO to ``dump_dir``."""
    return " ".join(filter(None, [
        existing, f"--xla_dump_to={dump_dir}", "--xla_dump_hlo_as_text",
        f"--xla_dump_hlo_module_re=.*{DUMP_MODULE_PREFIX}.*"]))


# -- the FLOP fields of a record ------------------------------------------------------

def add_flops(rec, flops, peak_gflops):
    """Adds a variant's FLOP fields, achieved GFLOP/s and the fraction of the matmul peak."""
    rec.update(flops)
    if rec.get("flops_per_step") and "ms_per_step_median" in rec:
        gflops = rec["flops_per_step"] / (rec["ms_per_step_median"] / 1e3) / 1e9
        rec["gflops_per_s"] = gflops
        rec["fraction_of_peak"] = gflops / peak_gflops if peak_gflops else None


def analytic_fields(config, size):
    analytic, complete = analytic_flops(config, size.batch, size.src_len, size.tgt_len)
    return {"flops_analytic": analytic, "flops_analytic_complete": complete,
            "flops_hlo": None, "flops_hlo_loops": None,
            "flops_per_step": analytic, "flops_method": "analytic_matmul"}


def count_flops(run, size, mode, dump_dir, log):
    """The FLOP fields of a record (see :mod:`benchmarks.bench`)."""
    out = analytic_fields(run.config, size)
    want_hlo = mode == "hlo" or (mode == "auto" and run.xla)
    if not want_hlo:
        return out
    note = None
    try:
        counted = hlo_dot_flops(run.hlo_text(dump_dir))
        out["flops_hlo"], out["flops_hlo_loops"] = counted["flops"], counted["loops"]
        if counted["flops"] is None:
            note = "a loop with dots had no resolvable trip count"
    except Exception as e:
        note = error_text(e)[:300]
    if out["flops_hlo"]:
        out.update(flops_per_step=out["flops_hlo"], flops_method="xla_hlo_dot")
    else:
        out["flops_hlo_error"] = note or "no HLO dump found"
        log(f"  {run.size_name} {run.variant}: no HLO FLOP count "
            f"({out['flops_hlo_error']}); using the analytic count")
    return out
