"""The summarization phase schedule of Appendix A / Table 5."""

import pytest

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
