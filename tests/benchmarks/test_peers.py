"""``make bench-peers``: the batches both sides read, the report writers, the final line;
the whole quick mode when the OpenNMT-tf environment (.venv-peers) exists. No timing is
asserted."""

import dataclasses
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from benchmarks.peers import common, run

QUICK = common.SIZES["quick"]
FINAL_LINES = (re.compile(r"^ours/opennmt-tf tokens/s: \d+\.\d\d \(fp32\)$"),
               re.compile(r"^ours/opennmt-tf beam sentences/s: \d+\.\d\d \(fp32\)$"))


def test_batches_are_deterministic_and_shaped_as_the_size():
    a, b = common.make_batches(QUICK, seed=3), common.make_batches(QUICK, seed=3)
    assert a.keys() == b.keys() == {"src", "tgt_in", "tgt_out", "beam_src"}
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    other = common.make_batches(QUICK, seed=4)
    assert not np.array_equal(a["src"], other["src"])

    count = QUICK.warmup + 1 + QUICK.steps
    assert a["src"].shape == (count, QUICK.batch, QUICK.src_len)
    assert a["tgt_in"].shape == a["tgt_out"].shape == (count, QUICK.batch, QUICK.tgt_len)
    assert a["beam_src"].shape == (QUICK.beam_batch, QUICK.src_len)
    assert a["src"].max() < QUICK.src_vocab and a["tgt_out"].max() < QUICK.tgt_vocab
    # Teacher forcing: tgt_in is bos + tgt_out shifted right; every target ends with eos.
    assert (a["tgt_in"][..., 0] == common.BOS).all()
    np.testing.assert_array_equal(a["tgt_in"][..., 1:], a["tgt_out"][..., :-1])
    assert (a["tgt_out"][..., -1] == common.EOS).all()
    assert common.target_tokens(a["tgt_out"][0]) == QUICK.batch * QUICK.tgt_len


def test_both_sides_read_the_same_batches(tmp_path):
    batches = common.make_batches(QUICK, seed=0)
    path = str(tmp_path / "batches.npz")
    common.save_batches(path, batches, QUICK, seed=0)
    loaded, size, seed = common.load_batches(path)  # what each worker calls
    assert size == QUICK and seed == 0
    for key in batches:
        np.testing.assert_array_equal(loaded[key], batches[key])

    # The OpenNMT-tf worker only renames the special ids; words and pads are the same.
    for key in ("src", "tgt_in", "tgt_out"):
        ours, peer = loaded[key], common.to_opennmt_ids(loaded[key])
        assert peer.shape == ours.shape
        words = ours > common.EOS
        np.testing.assert_array_equal(peer[words], ours[words])
        assert (peer[ours == common.BOS] == common.ONMT_BOS).all()
        assert (peer[ours == common.EOS] == common.ONMT_EOS).all()
        assert (peer[ours == common.PAD] == common.PAD).all()


def _result(ours_tokens_s=2.0, peer_tokens_s=1.0, idle=True):
    load = {"start": [0.0, 0.0, 0.0] if idle else [3.0, 3.0, 3.0],
            "before_timing": [0.1, 0.0, 0.0], "after_timing": [0.9, 0.2, 0.1],
            "others_cores_during_timing": 0.01 if idle else 1.5}
    sides = {side: {"error": None, "tensorflow": "x", "parameters": 10,
                    **run.summarize([1.0 / t] * 2, [0.5, 0.25], tokens=1, beam_batch=2)}
             for side, t in (("ours", ours_tokens_s), ("opennmt-tf", peer_tokens_s))}
    return run.build_result("quick", ["--quick"], QUICK, load, sides, 1.0, seed=0)


def test_json_and_markdown_writer(tmp_path):
    result = _result()
    md_path = run.write_outputs(result, str(tmp_path / "out" / "bench_peers.json"))
    written = json.loads((tmp_path / "out" / "bench_peers.json").read_text())
    assert written["ratios"]["tokens_per_s"] == pytest.approx(2.0)
    assert written["load_average"]["start"] == [0.0, 0.0, 0.0]
    assert written["settings"] == {**dataclasses.asdict(QUICK), "seed": 0, "precision": "fp32",
                                   "xla": False, "order": "alternating, ours first in each round"}
    assert set(written["sides"]) == {"ours", "opennmt-tf"}
    assert written["sides"]["ours"]["steps_timed"] == 2
    md = open(md_path).read()
    assert md_path.endswith("bench_peers.md")
    assert "| | ours | OpenNMT-tf | ours/OpenNMT-tf |" in md
    assert "| target tokens/s | 2 | 1 | 2.00 |" in md
    assert "| oneDNN CPU kernels | - | - | |" in md  # not reported by these sides
    assert "not idle" not in md
    busy = run.markdown(_result(idle=False))
    assert "not idle" in busy and "[3.0, 3.0, 3.0]" in busy


def test_final_line_format():
    """Printed last, one line each: the training tokens/s ratio, then the beam search's
    sentences/s ratio (issue 35's form)."""
    tokens, beam = run.final_line(_result(3.0, 2.0)).split("\n")
    assert FINAL_LINES[0].match(tokens) and tokens.endswith(": 1.50 (fp32)")
    # beam: 2 sentences in the median of [0.5, 0.25] s on both sides
    assert beam == "ours/opennmt-tf beam sentences/s: 1.00 (fp32)"
    result = _result()
    result["sides"]["opennmt-tf"].pop("tokens_per_s")
    result["ratios"]["tokens_per_s"] = run.ratio(result, "tokens_per_s")
    assert run.final_line(result).split("\n")[0] == "ours/opennmt-tf tokens/s: n/a (fp32)"


def test_our_precision_is_in_the_settings_the_report_and_the_final_line():
    sides = _result()["sides"]
    result = run.build_result("quick", ["--quick"], QUICK, _result()["load_average"], sides,
                              1.0, ours_precision="mixed_bfloat16", seed=0)
    assert result["settings"]["precision"] == "ours mixed_bfloat16, opennmt-tf fp32"
    assert run.final_line(result) == (
        "ours/opennmt-tf tokens/s: 2.00 (ours mixed_bfloat16, opennmt-tf fp32)\n"
        "ours/opennmt-tf beam sentences/s: 1.00 (ours mixed_bfloat16, opennmt-tf fp32)")
    assert "steps. ours mixed_bfloat16, opennmt-tf fp32, no XLA." in run.markdown(result)
    assert run.parse_args(["--precision=mixed_float16"]).precision == "mixed_float16"


def test_our_xla_setting_is_in_the_settings_the_report_and_the_final_line():
    result = run.build_result("quick", ["--quick", "--xla"], QUICK, _result()["load_average"],
                              _result()["sides"], 1.0, xla=True, seed=0)
    assert result["settings"]["xla"] is True
    assert run.final_line(result).split("\n")[0] == \
        "ours/opennmt-tf tokens/s: 2.00 (fp32, ours XLA)"
    assert "steps. fp32, ours XLA, our training step XLA-compiled." in run.markdown(result)
    assert run.parse_args(["--xla"]).xla and not run.parse_args([]).xla


def test_size_overrides_change_only_what_they_name():
    size = run.size_of(run.parse_args(["--src_len=15", "--tgt_len=16", "--src_vocab=5921",
                                       "--steps=9"]))
    full = common.SIZES["full"]
    assert (size.src_len, size.tgt_len, size.src_vocab, size.steps) == (15, 16, 5921, 9)
    assert dataclasses.replace(size, src_len=full.src_len, tgt_len=full.tgt_len,
                               src_vocab=full.src_vocab, steps=full.steps) == full
    assert run.size_of(run.parse_args(["--quick"])) == common.SIZES["quick"]


@pytest.mark.parametrize("precision, xla", [("mixed_float16", "off"), ("float32", "on")])
def test_our_worker_runs_its_precision_and_xla_setting(tmp_path, precision, xla):
    """The ``ours`` worker at the quick size (no OpenNMT-tf needed) with ``mixed_float16``
    (the model and its loss-scaled SGD) and with its training step XLA-compiled: the
    training step and beam search run (the warm-up runs each once, then once more here)."""
    from benchmarks.peers import ours
    path = str(tmp_path / "batches.npz")
    common.save_batches(path, common.make_batches(QUICK, seed=0), QUICK, seed=0)
    info, ops = ours.setup(path, precision, xla)
    assert info["precision"] == precision and info["xla"] == (xla == "on")
    assert "beam_error" not in info and "error" not in info, info
    ops["train"]()
    ops["beam"]()


def test_quick_mode_end_to_end(tmp_path):
    if not os.path.exists(run.DEFAULT_PEER_PYTHON):
        pytest.skip("no OpenNMT-tf environment (.venv-peers): `make bench-peers` creates it")
    out = tmp_path / "bench_peers_quick.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.peers", "--quick", f"--out={out}"],
                          cwd=run.REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-2:]
    assert all(p.match(line) for p, line in zip(FINAL_LINES, last)), proc.stdout[-500:]
    result = json.loads(out.read_text())
    assert (tmp_path / "bench_peers_quick.md").exists()
    assert (tmp_path / "bench_peers_quick_batches.npz").exists()
    for side in ("ours", "opennmt-tf"):
        rec = result["sides"][side]
        assert rec["error"] is None and "beam_error" not in rec, rec
        assert rec["steps_timed"] == QUICK.steps and rec["beam_calls_timed"] == QUICK.beam_reps
        assert rec["parameters"] > 0
    assert result["sides"]["opennmt-tf"]["opennmt_tf"] == "2.32.0"
    # the same CPU kernels on both sides (this process's TF_ENABLE_ONEDNN_OPTS, which
    # conftest sets to 0 unless the user chose), as each side's TensorFlow reports them
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS") == "1"
    assert result["sides"]["ours"]["onednn"] is onednn
    assert result["sides"]["opennmt-tf"]["onednn"] is onednn
    state = "on" if onednn else "off"
    assert f"| oneDNN CPU kernels | {state} | {state} | |" in (
        tmp_path / "bench_peers_quick.md").read_text()
    assert all(result["load_average"][k] for k in ("start", "before_timing", "after_timing"))
