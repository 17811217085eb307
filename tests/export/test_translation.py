"""The translation SavedModel (--mode=export): loaded in a fresh process that never
imports acvi_tf, it gives exactly the CLI's --mode=decode output on the same lines
(empty, all-OOV and odd-whitespace lines included), greedy and beam; the signature
is listed by saved_model_cli; the assets record the run and the commit."""

import json
import os

import pytest

from tests import cli
from tests.experiments.test_translate import _cli, _write_mirror
from tests.export.serving import run_env, serve_in_fresh_process

LINES = ["a man runs on the grass .", "", "zzz qqq xyzzy", "a dog   plays\twith a red ball .",
         "a", "the child jumps in the snow with a blue ball and a cat sits on the grass ."]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    env = run_env(root, _write_mirror)
    model_dir = str(root / "run")
    # ACVI as the tables run it, trained until the translations differ from line to line.
    r = _cli(["--profile=smoke", "--attention=acvi", "--attention_option=kl_weight=0.0001",
              "--gumbel_fraction=0", f"--model_dir={model_dir}", "--mode=train",
              "--train_steps=100", "--eval_every=100", "--checkpoint_every=100"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    src = root / "input.en"
    src.write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    return root, env, model_dir, str(src)


def _export_translates_as_the_cli_decodes(trained, beam_width):
    root, env, model_dir, src = trained
    export_dir = str(root / f"export_beam{beam_width}")
    r = _cli([f"--model_dir={model_dir}", "--mode=export", f"--export_dir={export_dir}",
              f"--beam_width={beam_width}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    r = _cli([f"--model_dir={model_dir}", "--mode=decode", f"--input={src}",
              f"--beam_width={beam_width}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    cli = r.stdout.split("\n")[:-1]
    assert len(cli) == len(LINES) and cli[1] == ""
    assert len(set(cli) - {""}) > 1, cli  # a model that says one thing would prove little

    # once in a new interpreter, where nothing was imported before the loader's imports
    served = serve_in_fresh_process(export_dir, str(root), fresh_interpreter=beam_width == 1,
                                    text=LINES)
    assert served["translation"] == cli
    assert served["score"][1] == 0.0  # the empty line
    assert all(s < 0 for i, s in enumerate(served["score"]) if i != 1)

    info = json.load(open(os.path.join(export_dir, "assets", "export.json")))
    assert info["task"] == "translate" and info["decode"]["beam_width"] == beam_width
    assert info["model_config"]["attention"] == "acvi"
    assert "commit" in (info["code"] or {"commit": None})
    assert {"vocab.en.txt", "vocab.de.txt", "model_config.json"} <= set(
        os.listdir(os.path.join(export_dir, "assets")))


def test_the_export_translates_text_exactly_as_the_cli_decodes(trained):
    """Greedy and beam 2 in one test: both read the module's trained run, and two
    tests could land on two pytest workers and train it twice."""
    for beam_width in (1, 2):
        _export_translates_as_the_cli_decodes(trained, beam_width)


def test_saved_model_cli_lists_the_serving_signature(trained):
    root, env, model_dir, _ = trained
    export_dir = str(root / "export_beam1")  # written by the export test above (greedy)
    if not os.path.isdir(export_dir):
        r = _cli([f"--model_dir={model_dir}", "--mode=export", f"--export_dir={export_dir}",
                  "--beam_width=1"], env)
        assert r.returncode == 0, r.stderr[-3000:]
    # A second export into the same (now non-empty) directory is refused, naming it,
    # and leaves the first one whole.
    again = _cli([f"--model_dir={model_dir}", "--mode=export", f"--export_dir={export_dir}"],
                 env)
    assert again.returncode != 0 and "not empty" in again.stderr and export_dir in again.stderr
    show = cli.run("tensorflow.python.tools.saved_model_cli",
                   ["show", "--dir", export_dir, "--all"], timeout=300,
                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert show.returncode == 0, show.stderr[-3000:]
    assert "signature_def['serving_default']" in show.stdout
    for name in ("inputs['text']", "outputs['translation']", "outputs['score']"):
        assert name in show.stdout, show.stdout


def test_export_dir_is_a_flag_of_the_export_mode(trained):
    root, env, model_dir, _ = trained
    r = _cli([f"--model_dir={model_dir}", "--mode=export"], env)
    assert r.returncode != 0 and "--export_dir: is required by --mode=export" in r.stderr
    r = _cli([f"--model_dir={model_dir}", "--mode=eval", f"--export_dir={root}/x"], env)
    assert r.returncode != 0 and "--export_dir: is only used with --mode=export" in r.stderr
