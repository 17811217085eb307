import json

import pytest

from benchmarks import op_profile


def test_toy_trace_attributes_the_step_to_op_types(tmp_path):
    out = tmp_path / "op.json"
    op_profile.main(["--size=toy", "--rows=soft", "--steps=1", f"--out={out}"])
    result = json.loads(out.read_text())
    soft = result["rows"]["soft"]
    # the step's matrix products and its LSTM gates are in the trace, under their classes
    assert soft["classes_ms"]["matmul"] > 0 and soft["classes_ms"]["elementwise"] > 0
    assert soft["total_ms"] == pytest.approx(sum(soft["ops_ms"].values()), rel=1e-2, abs=0.01)
    assert soft["total_ms"] == pytest.approx(sum(soft["classes_ms"].values()), rel=1e-2, abs=0.01)
    assert "IDLE" not in soft["ops_ms"]
    assert "| matmul |" in (tmp_path / "op.md").read_text()


def test_op_classes_see_through_onednn_names():
    assert op_profile.op_class("_MklNativeFusedMatMul") == "matmul"
    assert op_profile.op_class("_MklEinsum") == "matmul"
    assert op_profile.op_class("BatchMatMulV2") == "matmul"
    assert op_profile.op_class("TensorListPushBack") == "loop bookkeeping"
    assert op_profile.op_class("StatelessRandomNormalV2") == "random"
    assert op_profile.op_class("SomethingNew") == "other"


def test_a_row_that_is_no_ablation_row_is_a_flag_error(capsys):
    with pytest.raises(SystemExit):
        op_profile.main(["--rows=soft,nonsense"])
    assert "--rows: nonsense" in capsys.readouterr().err
