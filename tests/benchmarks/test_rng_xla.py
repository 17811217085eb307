import json

import pytest

from benchmarks import rng_xla


def test_toy_run_times_every_op_both_ways_with_and_without_xla(tmp_path):
    out = tmp_path / "rng.json"
    rng_xla.main(["--shape=3,4", "--rounds=1", f"--out={out}"])
    result = json.loads(out.read_text())
    keys = {(r["xla"], r["op"], r["alg"]) for r in result["rows"]}
    assert keys == {(x, op, alg) for x in (False, True) for op in rng_xla.OPS
                    for alg in ("auto_select", "philox")}
    assert all(r["ms_median"] > 0 for r in result["rows"])
    assert "| on | normal | philox |" in (tmp_path / "rng.md").read_text()


def test_a_shape_that_is_no_list_of_integers_is_a_flag_error(capsys):
    with pytest.raises(SystemExit):
        rng_xla.main(["--shape=4,x"])
    assert "--shape: '4,x'" in capsys.readouterr().err
