"""acvi_tf.run.records: a run's history and settings read without TensorFlow."""

import json
import subprocess
import sys

from acvi_tf.run.records import curve, load_run_config, read_history


def test_history_skips_the_line_a_running_run_is_writing(tmp_path):
    with open(tmp_path / "history.jsonl", "w") as f:
        f.write(json.dumps({"step": 50, "train": {"loss": 2.0}}) + "\n")
        f.write(json.dumps({"step": 100, "eval": {"dev_bleu": 1.5}}) + "\n")
        f.write('{"step": 150, "tra')
    history = read_history(str(tmp_path))
    assert [r["step"] for r in history] == [50, 100]
    assert curve(history, "eval", "dev_bleu") == ([100], [1.5])
    assert read_history(str(tmp_path / "none")) == []
    assert load_run_config(str(tmp_path)) is None
    (tmp_path / "run_config.json").write_text('{"flags": {"seed": 3}}')
    assert load_run_config(str(tmp_path)) == {"flags": {"seed": 3}}


def test_importing_it_imports_no_tensorflow():
    probe = ("import sys, acvi_tf.run.records\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('tensorflow', 'keras', 'numpy')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
