"""The captioning SavedModel (--mode=export): clip features in, captions out. Loaded in a
process that never imports acvi_tf, it gives exactly the captions of the CLI's
--mode=decode for the same clips, greedy and beam; its assets record the run."""

import json
import os

import numpy as np
import pytest

from acvi_tf.data import video_features as vf
from tests.experiments.test_caption import SMOKE, _cli, _write_mirror
from tests.export.serving import run_env, serve_in_fresh_process

CLIPS = ["vid5", "vid17", "vid1371", "vid42", "vid999", "vid1300"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("export_caption")
    env = run_env(root, _write_mirror)
    model_dir = str(root / "run")
    r = _cli(SMOKE + ["--attention=acvi", "--attention_option=kl_weight=0.0001",
                      "--gumbel_fraction=0", f"--model_dir={model_dir}", "--mode=train",
                      "--train_steps=60", "--eval_every=60", "--checkpoint_every=60"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    # The synthetic store the run was trained on, as the CLI reads it for these clips.
    features = vf.SyntheticFeatures(warn=False).get_batch(CLIPS).astype(np.float32)
    return root, env, model_dir, features


def _export_captions_as_the_cli_decodes(trained, beam_width):
    root, env, model_dir, features = trained
    export_dir = str(root / f"export_beam{beam_width}")
    # min_length: an untrained-looking beam prefers "</s>" at once; the setting must
    # reach the exported search as it reaches the CLI's.
    decode = [f"--beam_width={beam_width}", "--min_length=3"]
    r = _cli([f"--model_dir={model_dir}", "--mode=export", f"--export_dir={export_dir}"]
             + decode, env)
    assert r.returncode == 0, r.stderr[-3000:]
    r = _cli([f"--model_dir={model_dir}", "--mode=decode"] + decode, env,
             stdin="".join(c + "\n" for c in CLIPS))
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    assert [c for c, _ in rows] == CLIPS
    cli = [caption for _, caption in rows]
    assert all(len(c.split()) >= 3 for c in cli), cli

    served = serve_in_fresh_process(export_dir, str(root), features=features)
    assert served["caption"] == cli
    assert all(s < 0 for s in served["score"])

    info = json.load(open(os.path.join(export_dir, "assets", "export.json")))
    assert info["task"] == "caption" and info["decode"]["beam_width"] == beam_width
    assert info["decode"]["min_length"] == 3
    assert info["feature_dim"] == 1024 and info["num_frames"] == vf.NUM_FRAMES
    assert {"vocab.txt", "model_config.json"} <= set(
        os.listdir(os.path.join(export_dir, "assets")))


def test_the_export_captions_exactly_as_the_cli_decodes(trained):
    """Greedy and beam 2 in one test: both read the module's trained run, and two
    tests could land on two pytest workers and train it twice."""
    for beam_width in (1, 2):
        _export_captions_as_the_cli_decodes(trained, beam_width)
