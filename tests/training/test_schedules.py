"""The summarization phase schedule of Appendix A / Table 5, and the learning-rate schedules."""

import pytest

from acvi_tf.training import schedules
from acvi_tf.training.schedules import ModeSchedule, PhaseSchedule


def test_paper_phases():
    s = PhaseSchedule()
    assert s.total_steps == 253_000
    assert s.phase(0) == {"index": 0, "max_enc_steps": 10, "max_dec_steps": 10, "coverage": False}
    assert s.phase(70_999)["max_enc_steps"] == 10
    assert s.phase(71_000)["max_enc_steps"] == 50
    assert s.phase(184_000)["max_enc_steps"] == 200
    assert s.phase(249_999)[("max_dec_steps")] == 100
    assert s.phase(249_999)["coverage"] is False
    assert s.phase(250_000)["coverage"] is True
    assert s.phase(252_999) == {"index": 5, "max_enc_steps": 400, "max_dec_steps": 100,
                                "coverage": True}


def test_scaled_schedule_keeps_order_and_composes_with_gumbel():
    s = PhaseSchedule().scaled(0.001, 0.1)
    ends = [p[0] for p in s.phases]
    assert ends == sorted(ends) and len(set(ends)) == 5
    assert s.phases[-1][1:] == (40, 10)
    modes = ModeSchedule(s.total_steps, 0.1, extra=s.modes)
    last = s.total_steps - 1
    assert modes.modes(last) == {"acvi_mixing": "gumbel", "coverage": True}
    assert modes.modes(0) == {"acvi_mixing": "weighted", "coverage": False}


def test_bad_phases_are_rejected():
    with pytest.raises(ValueError, match="increase"):
        PhaseSchedule([(10, 5, 5), (5, 6, 6)])


def test_fit_reproduces_table5_and_scales_it():
    paper = PhaseSchedule.fit(253_000, 3_000, 400, 100)
    assert paper.phases == PhaseSchedule().phases and paper.coverage_steps == 3_000
    cpu = PhaseSchedule.fit(2_000, 200, 200, 50)
    # Table 5's proportions over 1,800 steps: 71/250 of them in phase 1, ...
    assert [p[0] for p in cpu.phases] == [511, 835, 1325, 1606, 1800]
    assert [p[1:] for p in cpu.phases] == [(5, 5), (25, 25), (50, 25), (100, 25), (200, 50)]
    assert cpu.phase(1799)["coverage"] is False and cpu.phase(1800)["coverage"] is True
    assert cpu.total_steps == 2_000
    flat = PhaseSchedule.fit(10, 0, 30, 8, phases=False)
    assert flat.phases == ((10, 30, 8),) and flat.phase(9)["coverage"] is False
    with pytest.raises(ValueError, match="coverage"):
        PhaseSchedule.fit(10, 10, 30, 8)


def test_phase_steps_repeat_the_short_runs_curriculum_then_continue_it():
    short = PhaseSchedule.fit(2_000, 0, 200, 50)
    long = PhaseSchedule.fit(10_000, 0, 200, 50, phase_steps=2_000)
    # every phase of the 2,000-step run, step for step; the last (200 / 50) runs on
    assert long.phases[:-1] == short.phases[:-1] == (
        (568, 5, 5), (928, 25, 25), (1472, 50, 25), (1784, 100, 25))
    assert long.phases[-1] == (10_000, 200, 50) and short.phases[-1] == (2_000, 200, 50)
    assert all(long.phase(t) == short.phase(t) for t in range(0, 2_000, 7))
    assert long.phase(9_999) == {"index": 4, "max_enc_steps": 200, "max_dec_steps": 50,
                                 "coverage": False}
    # with coverage: the phases over phase_steps, final lengths to the coverage steps
    cov = PhaseSchedule.fit(3_000, 200, 200, 50, phase_steps=1_800)
    assert cov.phases[:-1] == PhaseSchedule.fit(2_000, 200, 200, 50).phases[:-1]
    assert cov.phases[-1] == (2_800, 200, 50) and cov.total_steps == 3_000
    assert PhaseSchedule.fit(2_000, 0, 200, 50, phase_steps=2_000).phases == short.phases
    for bad in (0, 2_001):
        with pytest.raises(ValueError, match=f"phase_steps={bad} must be between 1 and"):
            PhaseSchedule.fit(2_000, 0, 200, 50, phase_steps=bad)


def test_warmup_cosine_schedule_is_its_closed_form():
    import math
    peak, total, warm, f = 2e-3, 1000, 100, schedules.COSINE_FINAL_FRACTION
    lr = schedules.warmup_cosine_schedule(peak, total, warm)

    def closed(t):
        if t < warm:
            return peak * t / warm
        t = min(t, total)
        return peak * (f + (1 - f) * (1 + math.cos(math.pi * (t - warm) / (total - warm))) / 2)
    for t in (0, 1, 50, 99, 100, 101, 400, 550, 999, 1000, 1500):
        assert float(lr(t)) == pytest.approx(closed(t), rel=1e-5, abs=1e-12), t
    no_warmup = schedules.warmup_cosine_schedule(peak, total)
    assert float(no_warmup(0)) == pytest.approx(peak) and float(no_warmup(total)) == \
        pytest.approx(f * peak)
    with pytest.raises(ValueError, match="warmup_steps=1000 must be below train_steps=1000"):
        schedules.warmup_cosine_schedule(peak, total, total)


def test_make_optimizer_takes_the_cosine_schedule_for_adam_and_refuses_luong():
    from acvi_tf.training.trainer import TrainConfig, make_optimizer
    opt = make_optimizer(TrainConfig(model_dir="", learning_rate=1e-3, train_steps=200,
                                     lr_decay="cosine", warmup_steps=20))
    assert float(opt.learning_rate) == 0.0  # the first step of the warm-up
    with pytest.raises(ValueError, match="--lr_decay=luong is the SGD step decay"):
        make_optimizer(TrainConfig(model_dir="", lr_decay="luong"))


def test_paper_scale_gumbel_tail_contains_the_coverage_phase():
    """At the paper's 253,000 summarization steps (Table 5 + 3K coverage) the last 10% is
    the Gumbel tail: it starts at 227,700 in phase 5 (400 / 100 tokens, no coverage) and
    runs through the whole coverage phase (250,000-252,999) to the end of training."""
    phases = PhaseSchedule.fit(253_000, 3_000, 400, 100)  # what summarize --profile=paper runs
    modes = ModeSchedule(phases.total_steps, 0.1, extra=phases.modes)
    assert phases.total_steps == 253_000 and modes.gumbel_start() == 227_700
    assert modes.modes(227_699) == {"acvi_mixing": "weighted", "coverage": False}
    assert modes.modes(227_700) == {"acvi_mixing": "gumbel", "coverage": False}
    assert phases.phase(227_700)["index"] == 4 and phases.phase(227_700)["max_enc_steps"] == 400
    assert modes.modes(249_999) == {"acvi_mixing": "gumbel", "coverage": False}
    assert modes.modes(250_000) == {"acvi_mixing": "gumbel", "coverage": True}
    assert modes.modes(252_999) == {"acvi_mixing": "gumbel", "coverage": True}
    # every step's modes: weighted then Gumbel, no coverage then coverage, each switching
    # once, Gumbel first (the trainer retraces once per change)
    changes = [s for s in range(1, 253_000) if modes.modes(s) != modes.modes(s - 1)]
    assert changes == [227_700, 250_000]
    assert [step for step, _ in schedules.milestones(modes, phases)] == [
        0, 71_000, 116_000, 184_000, 223_000, 227_700, 250_000, 253_000]
    assert "Gumbel" in schedules.milestones(modes, phases)[5][1]
    assert "coverage" in schedules.milestones(modes, phases)[6][1]


def test_paper_scale_gumbel_tail_of_translation_and_captioning():
    """The translation (12,000 steps) and captioning (15,000) paper profiles: the tail is
    their last 1,200 / 1,500 steps; --gumbel_fraction=0 (ACVI, ours) never switches."""
    from experiments import caption, translate
    for profiles, start in ((translate.PROFILES, 10_800), (caption.PROFILES, 13_500)):
        steps = profiles["paper"]["train_steps"]
        modes = ModeSchedule(steps, 0.1)
        assert modes.gumbel_start() == start
        assert [modes.modes(s)["acvi_mixing"] for s in (start - 1, start, steps - 1)] == [
            "weighted", "gumbel", "gumbel"]
        assert schedules.milestones(modes) == [
            (start, f"Gumbel-Softmax mixing (Eq. 23, the last 10% of {steps:,} steps)"),
            (steps, "end of training")]
        off = ModeSchedule(steps, 0.0)
        assert {off.modes(s)["acvi_mixing"] for s in range(0, steps, 100)} == {"weighted"}
