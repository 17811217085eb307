"""``make bench``: the smoke profile's JSON, the worker processes and the HLO FLOP count."""

import json
import textwrap

from acvi_tf import attention
from benchmarks import bench, flops, isolation, profiles, timing


def test_every_registered_variant_and_model_is_benchmarked_by_default():
    variants = profiles.planned_variants()
    assert set(variants) == set(attention.available()) | set(profiles.MODEL_VARIANTS)
    assert {"transformer", "ved", "vrnmt"} <= set(variants)  # every baseline outside attention
    assert variants[0] == profiles.BASELINE and len(variants) == len(set(variants))
    assert profiles.planned_variants("acvi") == [profiles.BASELINE, "acvi"]


def test_smoke_profile_reports_every_variant_it_runs(tmp_path):
    """The harness end to end at toy sizes on an attention variant (the soft baseline every
    run includes), a model and a latent (every variant's train step and beam search run in
    tests/experiments/test_every_variant.py; which ones `make bench` times is the test
    above)."""
    out = tmp_path / "bench.json"
    bench.main(["--profile=smoke", "--variants=transformer,ved", f"--out={out}"])
    result = json.loads(out.read_text())
    variants = {profiles.BASELINE, "transformer", "ved"}

    train = result["train"]
    assert {r["variant"] for r in train} == variants
    for r in train:
        assert r["error"] is None, r
        assert 0 < r["ms_per_step_min"] <= r["ms_per_step_median"]
        assert r["tokens_per_s"] > 0 and r["trace_s"] > 0 and r["compile_s"] >= 0
        assert r["flops_per_step"] > 0 and r["flops_method"] in ("xla_hlo_dot", "analytic_matmul")
        assert r["fraction_of_peak"] > 0
        assert r["ratio_to_soft"] > 0
        if r["variant"] == "soft":
            assert r["ratio_to_soft"] == 1.0 and r["ratio_to_soft_min"] == 1.0

    beam = result["beam"]
    assert {r["variant"] for r in beam} == variants
    for r in beam:
        assert r["error"] is None, r
        assert r["sentences_per_s"] > 0

    assert result["matmul"]["gflops_peak"] > 0
    assert result["machine"]["cpu_count"] >= 1 and result["machine"]["tensorflow"]


# A module in the shape XLA prints it: a fused dot, a forward while loop with
# a known trip count and its TF gradient loop (no count; matched by body id 7).
HLO = textwrap.dedent("""\
    HloModule a_inference_step_1__, entry_computation_layout={(f32[4,8]{1,0})->f32[4,16]{1,0}}

    %fused_computation (param_0: f32[4,8], param_1: f32[8,16]) -> f32[4,16] {
      %param_0 = f32[4,8]{1,0} parameter(0)
      %param_1 = f32[8,16]{1,0} parameter(1)
      ROOT %dot.1 = f32[4,16]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    }

    %cond.1 (p.0: (s32[], f32[4,8])) -> pred[] {
      %p.0 = (s32[], f32[4,8]{1,0}) parameter(0)
      %i.0 = s32[] get-tuple-element(%p.0), index=0
      %n.0 = s32[] constant(5)
      ROOT %lt = pred[] compare(%i.0, %n.0), direction=LT
    }

    %lstm_while_body_7_rewritten.3 (p.1: (s32[], f32[4,8])) -> (s32[], f32[4,8]) {
      %p.1 = (s32[], f32[4,8]{1,0}) parameter(0)
      %x.1 = f32[4,8]{1,0} get-tuple-element(%p.1), index=1
      %w.1 = f32[8,8]{1,0} constant({...})
      %d.1 = f32[4,8]{1,0} dot(%x.1, %w.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
      %i.1 = s32[] get-tuple-element(%p.1), index=0
      ROOT %t.1 = (s32[], f32[4,8]{1,0}) tuple(%i.1, %d.1)
    }

    %BODY (p.2: (s32[], f32[2,4,3])) -> (s32[], f32[2,4,3]) {
      %p.2 = (s32[], f32[2,4,3]{2,1,0}) parameter(0)
      %x.2 = f32[2,4,3]{2,1,0} get-tuple-element(%p.2), index=1
      %w.2 = f32[2,3,8]{2,1,0} constant({...})
      %d.2 = f32[2,4,8]{2,1,0} dot(%x.2, %w.2), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
      %i.2 = s32[] get-tuple-element(%p.2), index=0
      ROOT %t.2 = (s32[], f32[2,4,3]{2,1,0}) tuple(%i.2, %x.2)
    }

    ENTRY %main.9 (a.9: f32[4,8], b.9: f32[8,16]) -> f32[4,16] {
      %a.9 = f32[4,8]{1,0} parameter(0)
      %b.9 = f32[8,16]{1,0} parameter(1)
      %z.9 = s32[] constant(0)
      %init.9 = (s32[], f32[4,8]{1,0}) tuple(%z.9, %a.9)
      %while.1 = (s32[], f32[4,8]{1,0}) while(%init.9), condition=%cond.1, body=%lstm_while_body_7_rewritten.3, backend_config={"known_trip_count":{"n":"5"},"known_init_step":{"init":"0","step":"1"}}
      %init.8 = (s32[], f32[2,4,3]{2,1,0}) parameter(2)
      %while.2 = (s32[], f32[2,4,3]{2,1,0}) while(%init.8), condition=%cond.1, body=%BODY
      ROOT %fusion = f32[4,16]{1,0} fusion(%a.9, %b.9), kind=kOutput, calls=%fused_computation
    }
    """)


def test_hlo_dot_flops_counts_loop_bodies_times_their_trip_counts():
    fused, forward, grad = 2 * 4 * 16 * 8, 2 * 4 * 8 * 8, 2 * (2 * 4 * 8) * 3
    counted = flops.hlo_dot_flops(HLO.replace("%BODY", "%lstm_while_body_7_grad_9.4"))
    assert counted["flops"] == fused + 5 * forward + 5 * grad
    assert counted["loops"]["known_trip_count"] == 1
    assert counted["loops"]["from_forward_loop"] == 1
    # A loop with dots and no way to know its trip count: no HLO count at all.
    counted = flops.hlo_dot_flops(HLO.replace("%BODY", "%mystery_body.4"))
    assert counted["flops"] is None
    assert counted["loops"]["unresolved_with_dots"] == 1


def test_precision_option_builds_models_and_optimisers_of_that_policy():
    """--precision reaches the worker spec, the models and the optimiser (loss-scaled for
    float16); one training step and one beam search run (nothing is timed here)."""
    import keras
    assert bench.parse_args(["--precision=mixed_bfloat16"]).precision == "mixed_bfloat16"
    size = profiles.PROFILES["smoke"].sizes["translation"]
    for precision in ("mixed_bfloat16", "mixed_float16"):
        run = timing.TrainRun("translation", size, "acvi", False, 0, 0.0, precision)
        assert run.error is None, run.error
        assert run.model.config.precision == precision
        assert run.model.compute_dtype == precision.removeprefix("mixed_")
        assert isinstance(run.optimizer, keras.optimizers.LossScaleOptimizer) == (
            precision == "mixed_float16")
        run.first_call(warmup=0)
        rec = timing.run_beam("translation", size, "acvi", run.model, False, 1, 0, precision)
        assert rec["error"] is None, rec["error"]


def test_worker_results_come_back_and_a_crashed_worker_becomes_error_records():
    group = {"profile": "smoke", "size": "translation", "xla": False, "variants": ["soft", "acvi"],
             "flops": "auto", "seed": 0, "max_pad_fraction": 0.0, "warmup": 0, "steps": 1,
             "beam_reps": 1, "precision": "float32"}
    empty = isolation.spawn(dict(group, train=False, beam=False), log=lambda msg: None)
    assert empty == {"train": [], "flops": {}, "beam": [], "worker_exit_code": 0}

    del group["seed"]  # the worker dies on its first look at the spec
    crashed = isolation.spawn(dict(group, train=True, beam=True), log=lambda msg: None)
    assert crashed["worker_exit_code"] == 1
    assert [r["variant"] for r in crashed["train"]] == ["soft", "acvi"]
    assert [r["variant"] for r in crashed["beam"]] == ["soft", "acvi"]
    for r in crashed["train"] + crashed["beam"]:
        assert "worker process failed (exit code 1)" in r["error"]
