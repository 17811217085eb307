"""TensorBoard as a researcher sees it: one smoke run of each CLI (translate, summarize,
caption) under one ``runs/`` directory, read through a real ``tensorboard --logdir``
server (127.0.0.1, a free port, TensorBoard's default data loading) by the JSON its
dashboards read:

- Scalars (``/data/plugin/timeseries/tags``): every task's main metrics, whose tags
  must not be taken by another plugin (dev BLEU's sacrebleu signature, written as text
  under ``dev_bleu``, made TensorBoard drop the dev BLEU curve);
- Images: the attention heat maps; Text: the samples and the BLEU signature;
- HParams (``/data/plugin/hparams/experiment`` and ``session_groups``): one session per
  run, with its settings and its final val/test metrics.

The server is always stopped; every wait is bounded.
"""

import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests import cli
from tests.experiments import test_caption, test_summarize, test_translate

REPO = test_translate.REPO
STARTUP_SECONDS = 90  # TensorBoard imports TensorFlow before it answers (~4 s idle)
LOAD_SECONDS = 60     # its data loader reads the event files after it answers

# The three runs: CLI module, arguments, the fixture data writer of the task's own tests.
RUNS = {
    "translate": ("experiments.translate",
                  ["--profile=smoke", "--attention=acvi", "--attention_option=kl_weight=0.5"],
                  test_translate._write_mirror),
    "summarize": ("experiments.summarize", ["--profile=smoke", "--attention=soft"],
                  test_summarize._write_mirror),
    "caption": ("experiments.caption", test_caption.SMOKE + ["--attention=acvi"],
                test_caption._write_mirror),
}
# What a researcher opens the eval run's Scalars for.
MAIN_SCALARS = {"translate": ("dev_bleu", "dev_nll"),
                "summarize": ("val_rouge_1", "val_rouge_2", "val_rouge_l", "dev_nll"),
                "caption": ("val_CIDEr_D", "val_ROUGE_L", "dev_nll")}
# The final metrics of each run's HParams row, and where results.json has them.
FINAL_METRICS = {"translate": {"dev_bleu": ("bleu", "dev"), "test_bleu": ("bleu", "test"),
                               "dev_nll": ("diagnostics", "dev_nll")},
                 "summarize": {"test_rouge_1": ("rouge", "rouge_1"),
                               "test_rouge_l": ("rouge", "rouge_l"),
                               "val_rouge_1": ("diagnostics", "val_rouge_1")},
                 "caption": {"val_CIDEr_D": ("scores", "val", "CIDEr-D"),
                             "test_CIDEr_D": ("scores", "test", "CIDEr-D"),
                             "test_ROUGE_L": ("scores", "test", "ROUGE-L")}}
# The settings the HParams dashboard compares runs by.
SETTINGS = ("attention", "attention_option", "attention.kl_weight", "latent", "precision",
            "seed", "profile", "score", "learning_rate", "train_steps", "select_best", "task")


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    """``runs/<task>``: one smoke run of each CLI, on the fixture data of its tests."""
    root = tmp_path_factory.mktemp("tensorboard")
    for task, (module, args, write_mirror) in RUNS.items():
        env = dict(os.environ, ACVI_DATA_MIRROR=write_mirror(str(root / "mirror" / task)),
                   ACVI_DATA_DIR=str(root / "data" / task), TF_CPP_MIN_LOG_LEVEL="3",
                   PYTHONPATH=REPO)
        r = cli.run(module, args + [f"--model_dir={root / 'runs' / task}"], env=env,
                    timeout=600)
        assert r.returncode == 0, (task, r.stderr[-3000:])
    return str(root / "runs")


def _free_port():
    """A TCP port nobody listens on at 127.0.0.1 now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Board:
    """A ``tensorboard --logdir`` server in its own process group, and its JSON API.

    Requests bypass any HTTP proxy of the environment: they go to 127.0.0.1 only."""

    def __init__(self, logdir, log_path):
        self.logdir = logdir
        self.port = _free_port()
        self.log_path = log_path
        self.tags = None  # the timeseries tags, once loaded (wait_until_loaded)
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tensorboard.main", "--logdir", logdir,
                 "--host", "127.0.0.1", "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), start_new_session=True)

    def log_tail(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()[-3000:]

    def get(self, path, body=None):
        """The JSON of ``path``; with ``body``, a POST of it as JSON (the hparams routes)."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                         headers={"Content-Type": "application/json"})
        with self._opener.open(request, timeout=30) as response:
            return json.loads(response.read().decode("utf-8"))

    def wait_until_answering(self, seconds):
        deadline = time.monotonic() + seconds
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"tensorboard exited with {self.process.returncode}:\n"
                            f"{self.log_tail()}")
            try:
                return self.get("/data/logdir")
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    pytest.fail(f"tensorboard did not answer in {seconds} s:\n"
                                f"{self.log_tail()}")
                time.sleep(0.25)

    def wait_until_loaded(self, seconds):
        """The timeseries tags (kept in ``self.tags``) once TensorBoard lists every run
        on disk and two reads in a row agree: its loader reads the event files after
        the server answers."""
        expected, previous = _runs_on_disk(self.logdir), None
        deadline = time.monotonic() + seconds
        while True:
            tags = self.get("/data/plugin/timeseries/tags")
            listed = set(tags["scalars"]["runTagInfo"]) | {
                run for by_run in tags["images"]["tagRunSampledInfo"].values()
                for run in by_run}
            if expected <= listed and tags == previous:
                self.tags = tags
                return tags
            if time.monotonic() > deadline:
                pytest.fail(f"tensorboard listed {sorted(listed)} after {seconds} s; on "
                            f"disk: {sorted(expected)}")
            previous = tags
            time.sleep(0.5)

    def stop(self):
        """SIGTERM to the server's process group (TensorBoard and its data server),
        SIGKILL if it has not exited within 10 s."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def _runs_on_disk(logdir):
    """The TensorBoard runs of ``logdir``: the directories holding event files,
    relative to it ("translate/eval", ...)."""
    return {os.path.relpath(os.path.dirname(p), logdir)
            for p in glob.glob(os.path.join(logdir, "**", "events.out.tfevents.*"),
                               recursive=True)}


@pytest.fixture(scope="module")
def board(logdir, tmp_path_factory):
    """The server on ``logdir``, loaded; always stopped at the end."""
    server = Board(logdir, str(tmp_path_factory.mktemp("tensorboard_log") / "tensorboard.log"))
    try:
        server.wait_until_answering(STARTUP_SECONDS)
        server.wait_until_loaded(LOAD_SECONDS)
        yield server
    finally:
        server.stop()


def test_every_tasks_main_metrics_are_on_the_scalars_dashboard(board):
    scalars = board.tags["scalars"]["runTagInfo"]
    images = board.tags["images"]["tagRunSampledInfo"]
    texts = board.get("/data/plugin/text/tags")
    for task, tags in MAIN_SCALARS.items():
        listed = scalars.get(f"{task}/eval", [])
        missing = [t for t in tags if t not in listed]
        assert not missing, (f"{task}/eval: {missing} not on the Scalars dashboard; "
                             f"it lists {sorted(listed)}")
        assert {"loss", "nll", "learning_rate"} <= set(scalars.get(f"{task}/train", [])), task
        assert f"{task}/eval" in images.get("attention_sample_0", {}), (task, images)
        assert "sample_0" in texts.get(f"{task}/eval", []), (task, texts)
    # The signature has its own tag, on the Text dashboard.
    assert "dev_bleu_signature" in texts["translate/eval"], texts
    # No tag of a run is on two dashboards.
    for run, run_scalars in scalars.items():
        run_images = {tag for tag, by_run in images.items() if run in by_run}
        both = (set(run_scalars) & set(texts.get(run, []))) | (set(run_scalars) & run_images)
        assert not both, (run, both)


def test_hparams_dashboard_has_one_session_per_run_with_settings_and_metrics(board, logdir):
    experiment = board.get("/data/plugin/hparams/experiment", {"experimentName": ""})
    hparam_names = {h["name"] for h in experiment.get("hparamInfos", [])}
    assert set(SETTINGS) <= hparam_names, sorted(set(SETTINGS) - hparam_names)
    metric_names = {m["name"]["tag"] for m in experiment.get("metricInfos", [])}
    wanted = {m for metrics in FINAL_METRICS.values() for m in metrics}
    assert wanted <= metric_names, sorted(wanted - metric_names)

    groups = board.get("/data/plugin/hparams/session_groups", {
        "experimentName": "", "startIndex": 0, "sliceSize": 100,
        "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE",
                            "STATUS_RUNNING"]}).get("sessionGroups", [])
    by_session = {s["name"]: (g, s) for g in groups for s in g["sessions"]}
    assert sorted(by_session) == [f"{t}/hparams" for t in sorted(RUNS)], by_session.keys()
    assert len(groups) == len(RUNS)  # one row per run
    for task in RUNS:
        group, session = by_session[f"{task}/hparams"]
        hparams = group["hparams"]
        assert hparams["task"] == task and hparams["profile"] == "smoke", hparams
        with open(os.path.join(logdir, task, "run_config.json")) as f:
            flags = json.load(f)["flags"]
        assert hparams["attention"] == flags["attention"]
        assert hparams["seed"] == flags["seed"] and hparams["select_best"] == "none"
        assert hparams["learning_rate"] == pytest.approx(flags["learning_rate"])
        with open(os.path.join(logdir, task, "results.json")) as f:
            results = json.load(f)
        values = {m["name"]["tag"]: m["value"] for m in session["metricValues"]}
        for tag, keys in FINAL_METRICS[task].items():
            expected = results
            for key in keys:
                expected = expected[key]
            assert values.get(tag) == pytest.approx(expected, rel=1e-5, abs=1e-6), (task, tag)
    translate = by_session["translate/hparams"][0]["hparams"]
    assert translate["attention_option"] == "kl_weight=0.5"
    assert translate["attention.kl_weight"] == pytest.approx(0.5)
    assert by_session["summarize/hparams"][0]["hparams"]["attention.context_noise"] == 0.0


# Without a server: the checks behind what the dashboards show.

def test_a_tag_written_by_two_plugins_is_refused_by_name():
    from acvi_tf.training import summaries
    out = summaries.eval_output({"dev_bleu": 1.0}, {"dev_bleu_signature": "BLEU = 1.0"})
    assert out == {"scalars": {"dev_bleu": 1.0}, "texts": {"dev_bleu_signature": "BLEU = 1.0"},
                   "images": {}}
    with pytest.raises(ValueError, match="'dev_bleu' is written both as scalars and as texts"):
        summaries.eval_output({"dev_bleu": 1.0}, {"dev_bleu": "BLEU = 1.0"})


def _session(model_dir):
    """(hparams, {tag: value} of the scalars) of the one event file in model_dir/hparams."""
    import tensorflow as tf
    from tensorboard.plugins.hparams import metadata
    paths = glob.glob(os.path.join(model_dir, "hparams", "events.out.tfevents.*"))
    assert len(paths) == 1, paths
    hparams, scalars = None, {}
    for event in tf.compat.v1.train.summary_iterator(paths[0]):
        for v in event.summary.value:
            if v.tag == metadata.SESSION_START_INFO_TAG:
                info = metadata.parse_session_start_info_plugin_data(
                    v.metadata.plugin_data.content)
                hparams = {k: getattr(x, x.WhichOneof("kind")) for k, x in info.hparams.items()}
                assert info.group_name == os.path.abspath(model_dir)  # one row per run
            else:
                scalars[v.tag] = float(tf.make_ndarray(v.tensor))
    return hparams, scalars


def test_a_finished_run_has_one_hparams_session_with_its_latest_results(tmp_path):
    from acvi_tf.run.results import finish_results
    from acvi_tf.utils.files import save_json
    model_dir = str(tmp_path / "run")
    os.makedirs(model_dir)
    save_json(os.path.join(model_dir, "run_config.json"), {
        "profile": "smoke", "command": "python -m experiments.translate",
        "flags": {"attention": "acvi", "attention_option": ["kl_weight=0.5", "prior=standard"],
                  "seed": 3, "select_best": None, "learning_rate": 0.01, "xla": False}})
    save_json(os.path.join(model_dir, "model_config.json"), {
        "attention": "acvi", "attention_options": {"kl_weight": 0.5}, "latent": "",
        "latent_options": {}})
    finish_results(model_dir, {"task": "translate", "system": "acvi", "steps": 6,
                               "bleu": {"dev": 1.5, "test": 2.5},
                               "diagnostics": {"dev_nll": 3.0, "val_decode_seconds": 9.0}})
    # --mode=eval finishes the results again: its scores replace the session's.
    finish_results(model_dir, {"bleu": {"dev": 1.75, "test": 2.75}})
    hparams, scalars = _session(model_dir)
    assert scalars == {"dev_bleu": 1.75, "test_bleu": 2.75, "dev_nll": 3.0}
    assert hparams["attention"] == "acvi" and hparams["seed"] == 3 and hparams["xla"] is False
    assert hparams["attention_option"] == "kl_weight=0.5,prior=standard"
    assert hparams["select_best"] == "none" and hparams["profile"] == "smoke"
    assert hparams["task"] == "translate" and hparams["system"] == "acvi"
    # The options ACVI ran with: the given one, and the defaults of the others.
    assert hparams["attention.kl_weight"] == 0.5 and hparams["attention.mixing"] == "weighted"
    assert not any(name.startswith("latent.") for name in hparams)
