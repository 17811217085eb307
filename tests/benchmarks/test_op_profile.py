import json

import pytest

from acvi_tf.utils import shards
from benchmarks import op_profile


@pytest.fixture(autouse=True)
def _keep_shard_state(monkeypatch):
    """main() configures this process's batch shards: each test's stays its own."""
    monkeypatch.setattr(shards, "_state", dict(shards._state))


def test_toy_trace_attributes_the_step_to_op_types(tmp_path):
    out = tmp_path / "op.json"
    op_profile.main(["--size=toy", "--rows=soft", "--steps=1", f"--out={out}"])
    result = json.loads(out.read_text())
    soft = result["rows"]["soft"]
    # the step's matrix products and its LSTM gates are in the trace, under their classes
    assert soft["classes_ms"]["matmul"] > 0 and soft["classes_ms"]["elementwise"] > 0
    # each field is rounded (the total and the classes to 0.01 ms, the ops to 0.001 ms):
    # a sum of n rounded terms is off by up to n half-units, which a toy step of ~1 ms shows
    ops, classes = soft["ops_ms"].values(), soft["classes_ms"].values()
    assert soft["total_ms"] == pytest.approx(sum(ops), abs=0.005 + 0.0005 * len(ops))
    assert soft["total_ms"] == pytest.approx(sum(classes), abs=0.005 * (1 + len(classes)))
    assert "IDLE" not in soft["ops_ms"]
    assert "| matmul |" in (tmp_path / "op.md").read_text()
    # the step against the matmul peak measured in the same run
    assert result["matmul_peak"]["gflops_best"] > 0
    assert len(result["matmul_peak"]["measurements"]) == 2
    assert soft["matmul_flops"] > 0 and soft["flops_complete"] is True
    # (each field is rounded to 4 decimals: the toy step's fractions are ~0.002)
    assert soft["fraction_of_peak"] == pytest.approx(
        soft["matmul_share"] * soft["matmul_fraction_of_peak"], rel=1e-2, abs=2e-4)
    assert "## Against the matmul peak" in (tmp_path / "op.md").read_text()


def test_fraction_of_peak_is_the_matmul_share_times_the_rate_inside_matmuls():
    # 2 GFLOP in a 1-second step, 60% of op time in matrix products, a 10 GFLOP/s peak:
    # the step runs at 2 GFLOP/s (20%), the products at 2 / 0.6 GFLOP/s (33%).
    f = op_profile.peak_fields(2e9, True, 1.0, {"matmul": 600.0, "elementwise": 400.0},
                               1000.0, 10.0)
    assert f["gflops_step"] == 2.0 and f["fraction_of_peak"] == 0.2
    assert f["matmul_share"] == 0.6
    assert f["gflops_in_matmul"] == pytest.approx(3.33, abs=0.01)
    assert f["matmul_fraction_of_peak"] == pytest.approx(0.3333, abs=1e-4)
    assert op_profile.peak_fields(2e9, True, 1.0, {"elementwise": 5.0}, 5.0,
                                  10.0)["gflops_in_matmul"] is None


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


def test_op_names_drop_the_numeric_suffixes_of_copies():
    assert op_profile.op_name("einsum_1/Einsum", "_MklEinsum") == "einsum/Einsum (_MklEinsum)"
    assert (op_profile.op_name("while/body/_12/while/MatMul_3", "_MklMatMul")
            == "while/body//while/MatMul (_MklMatMul)")
    # a digit inside a name is kept
    assert op_profile.op_name("conv2d/W_h2", "MatMul") == "conv2d/W_h2 (MatMul)"


def test_grown_names_rank_by_the_time_added_and_count_a_new_name_from_zero():
    before = {"names_ms": {"a": 5.0, "b": 1.0}}
    after = {"names_ms": {"a": 5.5, "b": 4.0, "new": 2.0}}
    assert op_profile.grown_names(before, after, 2) == [("b", 1.0, 4.0), ("new", 0.0, 2.0)]
    assert op_profile.grown_names(before, {}, 3) == []


def test_the_rows_after_the_first_list_the_op_names_they_add(tmp_path):
    """ACVI against soft attention: each row keeps its op names' times, and the sigma
    network of Eq. 18 is among ACVI's names and none of soft attention's; the markdown
    lists the names that grew (which ones, at the toy size, is timing noise)."""
    out = tmp_path / "op.json"
    op_profile.main(["--size=toy", "--rows=soft,acvi", "--steps=1", "--cpu_shards=1",
                     f"--out={out}"])
    result = json.loads(out.read_text())
    soft, acvi = result["rows"]["soft"]["names_ms"], result["rows"]["acvi"]["names_ms"]
    assert not any("sigma_mlp" in n for n in soft)
    assert any("sigma_mlp" in n for n in acvi)
    assert result["batch_shards"]["cpu_shards"] == 1
    text = (tmp_path / "op.md").read_text()
    section = text.split("## The 15 op names that grew most from soft to acvi")[1]
    assert len([line for line in section.splitlines() if line.startswith("| `")]) == 15
