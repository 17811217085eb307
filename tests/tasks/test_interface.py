"""The three CLIs go through one Task interface (issue 36).

Every registered task implements each method of :class:`acvi_tf.tasks.base.Task` with the
base class's signature (read with :mod:`inspect`), its own modes name methods of the one
shape a mode has; the CLIs keep their flags and hand every mode to
:mod:`experiments.run_modes`, whose dispatch is checked here on a recording task: which
methods each mode calls, in which order, and that the run's settings are on disk before
the first training step."""

import ast
import inspect
import json
import os

import pytest
from absl import flags

from acvi_tf.tasks import TASKS
from acvi_tf.tasks.base import Mode, Task, Trained
from experiments import caption, run_modes, summarize, translate
from experiments import flags as xflags

# The interface: every public method of the base class, data hooks included.
INTERFACE = sorted(name for name, member in vars(Task).items()
                   if callable(member) and not name.startswith("_"))
CLIS = [translate, summarize, caption]


def test_the_interface_is_the_modes_and_their_hooks():
    assert {"train", "evaluate", "decode", "export", "finish", "prepare_training",
            "restore", "load_data", "data_status", "results", "evaluator"} <= set(INTERFACE)


@pytest.mark.parametrize("name", sorted(TASKS.names()))
def test_every_task_implements_the_interface_with_one_signature(name):
    cls = TASKS.get(name)
    assert issubclass(cls, Task) and cls.CONFIG is not None
    for method in INTERFACE:
        ours, theirs = inspect.signature(getattr(cls, method)), inspect.signature(
            getattr(Task, method))
        assert ours == theirs, f"{cls.__name__}.{method}{ours} is not Task.{method}{theirs}"
        if getattr(Task, method) is getattr(cls, method):
            # what the base class leaves to the task, the task implements
            assert "NotImplementedError" not in inspect.getsource(getattr(Task, method)), (
                f"{cls.__name__} does not implement {method}")


@pytest.mark.parametrize("name", sorted(TASKS.names()))
def test_a_tasks_own_modes_have_the_shape_of_a_mode(name):
    cls = TASKS.get(name)
    for mode, spec in cls.EXTRA_MODES.items():
        assert mode not in xflags.MODES and isinstance(spec, Mode)
        params = list(inspect.signature(getattr(cls, spec.method)).parameters)
        assert params == (["self", "trained", "model_dir"] if spec.needs_model
                          else ["self", "model_dir"]), (mode, params)


@pytest.mark.parametrize("cli", CLIS, ids=lambda m: m.__name__)
def test_each_cli_hands_its_modes_to_the_one_dispatch(cli):
    """A CLI keeps its flags and checks; its main calls run_modes.main with its Cli, whose
    task is the registered one, and it runs no mode itself."""
    assert cli.CLI.module == cli.MODULE and cli.CLI.task_class is TASKS.get(cli.CLI.task)
    assert set(cli.MODES) >= set(xflags.MODES) | set(cli.CLI.task_class.EXTRA_MODES)
    tree = ast.parse(inspect.getsource(cli))
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert not functions & {"run", "dry_run", "save_flags", "train", "make_task"}, functions
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    calls = {ast.unparse(n.func) for n in ast.walk(main) if isinstance(n, ast.Call)}
    assert "run_modes.main" in calls


class Recording(Task):
    """A task that records the interface calls of the dispatch."""

    DATASET = "nothing"
    OUTPUTS = "echoes"
    EXTRA_MODES = {"baseline": Mode("baseline", needs_model=False),
                   "extra": Mode("extra", needs_model=True)}

    def __init__(self, model_dir):
        super().__init__(None, log=lambda m: None)
        self.calls, self.model_dir = [], model_dir

    def _call(self, name, *args):
        self.calls.append((name,) + args)

    def data_status(self):
        self._call("data_status")
        return True, []

    def load_data(self, model_dir, read_only=False):
        self._call("load_data", read_only)

    def model_config(self, arch):
        return arch

    def prepare_training(self, model_dir, model_config, train_config):
        self._call("prepare_training", train_config.train_steps)
        os.makedirs(model_dir, exist_ok=True)
        return "plan"

    def train(self, plan, strategy=None):
        # the run's settings are on disk before the first step
        saved = os.path.exists(os.path.join(self.model_dir, "run_config.json"))
        self._call("train", plan, saved)
        return Trained("model", 6, None, 6, {"steps": 6, "train_pairs": 3})

    def restore(self, model_dir, model_config, train_steps=0):
        self._call("restore", train_steps)
        return Trained("model", 6, model_config, train_steps)

    def evaluate(self, trained, model_dir):
        self._call("evaluate", trained.info)
        return {"score": 1}

    def decode(self, trained, lines, attention_plots=None, plot_count=0):
        self._call("decode", attention_plots)
        return [line.upper() for line in lines]

    def export(self, trained, model_dir, export_dir):
        self._call("export", export_dir)

    def finish(self, model_dir, results):
        self._call("finish", results)

    def baseline(self, model_dir):
        self._call("baseline")
        return {"system": "baseline"}

    def extra(self, trained, model_dir):
        self._call("extra", trained.step)
        return {"extra": {"n": 1}}


@pytest.mark.parametrize("mode, calls", [
    ("train", [("load_data", False), ("prepare_training", 6), ("train", "plan", True)]),
    ("train_eval", [("load_data", False), ("prepare_training", 6), ("train", "plan", True),
                    ("evaluate", {"steps": 6, "train_pairs": 3}), ("finish", {"score": 1})]),
    ("eval", [("load_data", False), ("restore", 6), ("evaluate", None),
              ("finish", {"score": 1})]),
    ("decode", [("load_data", True), ("restore", 6), ("decode", None)]),
    ("export", [("load_data", True), ("restore", 6), ("export", "EXPORT")]),
    ("baseline", [("baseline",), ("finish", {"system": "baseline"})]),
    ("extra", [("load_data", False), ("restore", 6), ("extra", 6)]),
])
def test_the_dispatch_runs_each_mode_through_the_interface(mode, calls, tmp_path):
    model_dir = str(tmp_path / "run")
    source, out = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("a b\nc\n")
    fv = flags.FlagValues()
    translate.define_flags(fv)
    fv(["prog", "--profile=smoke", "--train_steps=6", f"--input={source}",
        f"--output={out}", "--export_dir=EXPORT"])
    xflags.apply_profile(translate.PROFILES, fv)
    fv["mode"].value = mode  # (the recording task's own modes are not translation's)
    task = Recording(model_dir)
    if mode in ("eval", "decode", "export", "extra"):
        os.makedirs(model_dir)
    assert run_modes.run(translate.CLI, task, model_dir, fv) == 0
    assert task.calls == calls
    # train: its training's fields merged into results.json, not finished; extra: a model
    # mode's sections merged; both with the run's provenance (the commit that wrote them)
    merged = {"train": {"steps": 6, "train_pairs": 3}, "extra": {"extra": {"n": 1}}}
    if mode in merged:
        with open(os.path.join(model_dir, "results.json"), encoding="utf-8") as f:
            results = json.load(f)
        assert "commit" in results.pop("provenance") and results == merged[mode]
    if mode == "decode":
        assert out.read_text() == "A B\nC\n"


def test_a_dry_run_is_the_same_in_every_task(capsys):
    task = Recording("unused")
    fv = flags.FlagValues()
    translate.define_flags(fv)
    fv(["prog", "--profile=smoke", "--dry_run"])
    assert run_modes.dry_run(translate.CLI, task, None, fv) == 0
    out = capsys.readouterr().out
    assert "command: python -m experiments.translate" in out and "data: complete" in out
    task.data_status = lambda: (False, ["  MISSING  x"])
    task.how_to_get = lambda: "get x"
    assert run_modes.dry_run(translate.CLI, task, None, fv) == 3
    assert "data: INCOMPLETE for nothing. To get it: get x" in capsys.readouterr().out
