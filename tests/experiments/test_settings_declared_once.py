"""Each setting is declared once (issue 36): a field added to a config dataclass, declared
with :func:`acvi_tf.utils.settings.setting`, is -- with no other edit -- a flag of the task
CLIs, in their ``--help``, in the configs built from the flags, saved with a run and, for
the model's and the decoding's settings, restored from the trained run."""

import dataclasses
import json
import os

import pytest
from absl import flags

from acvi_tf.models.seq2seq import ModelConfig
from acvi_tf.tasks.base import DecodeConfig
from acvi_tf.tasks.translation import TranslationConfig
from acvi_tf.training.trainer import TrainConfig
from acvi_tf.utils.settings import setting
from experiments import caption, run_modes, run_settings, summarize, translate
from experiments import flags as xflags


@dataclasses.dataclass
class ScratchModelConfig(ModelConfig):
    scratch_units: int = setting(7, "A scratch width of the model, added by a test.",
                                 lower_bound=1)


@dataclasses.dataclass
class ScratchTrainConfig(TrainConfig):
    scratch_rate: float = setting(0.5, "A scratch rate of the loop, added by a test.")


@dataclasses.dataclass
class ScratchDecodeConfig(DecodeConfig):
    scratch_search: str = setting("wide", "A scratch search of the decoding, added by a "
                                  "test.", choices=("wide", "narrow"))


@pytest.fixture
def scratch(monkeypatch):
    """The shared configs with one scratch field each (what adding a field does)."""
    monkeypatch.setattr(run_settings, "ModelConfig", ScratchModelConfig)
    monkeypatch.setattr(run_settings, "TrainConfig", ScratchTrainConfig)
    monkeypatch.setattr(run_settings, "DecodeConfig", ScratchDecodeConfig)


def _flags(cli, *args):
    fv = flags.FlagValues()
    cli.define_flags(fv)
    fv(["prog", *args])
    return fv


def _save(cli, model_dir, fv):
    languages = {"src": "en", "tgt": "de"} if cli is translate else {}
    run_modes.save_settings(cli.CLI, model_dir, languages, fv)


@pytest.mark.parametrize("cli", [translate, summarize, caption])
def test_a_new_field_is_a_flag_with_its_help_and_reaches_its_config(scratch, cli):
    fv = _flags(cli, "--profile=smoke", "--scratch_units=5", "--scratch_rate=0.25",
                "--scratch_search=narrow")
    help_text = " ".join(fv.get_help().split())
    for text in ("--scratch_units: A scratch width of the model, added by a test. "
                 "(default: '7') (a positive integer)",
                 "--scratch_rate: A scratch rate of the loop, added by a test.",
                 "--scratch_search: <wide|narrow>: A scratch search of the decoding"):
        assert text in help_text
    xflags.apply_profile(cli.PROFILES, fv)
    assert xflags.model_config_from_flags(fv).scratch_units == 5
    assert xflags.train_config_from_flags("/x", fv).scratch_rate == 0.25
    assert xflags.decode_config_from_flags(fv).scratch_search == "narrow"
    with pytest.raises(flags.IllegalFlagValueError):
        _flags(cli, "--scratch_units=0")


def test_a_new_field_is_saved_and_restored_from_the_trained_run(scratch, tmp_path):
    model_dir = str(tmp_path / "run")
    fv = _flags(translate, "--profile=smoke", "--scratch_units=5", "--scratch_rate=0.25",
                "--scratch_search=narrow")
    xflags.apply_profile(translate.PROFILES, fv)
    _save(translate, model_dir, fv)
    with open(os.path.join(model_dir, "run_config.json"), encoding="utf-8") as f:
        saved = json.load(f)["flags"]
    assert (saved["scratch_units"], saved["scratch_rate"], saved["scratch_search"]) == \
        (5, 0.25, "narrow")
    with open(os.path.join(model_dir, "flags.txt"), encoding="utf-8") as f:
        assert {"--scratch_units=5", "--scratch_rate=0.25", "--scratch_search=narrow"} <= \
            set(f.read().split())

    def evaluate(*args):  # a new start on the trained run, as --mode=eval resolves it
        fv = _flags(translate, f"--model_dir={model_dir}", "--mode=eval", *args)
        xflags.resolve_run_flags(model_dir, "eval", translate.PROFILES, TranslationConfig,
                                 fv, module=translate.MODULE)
        return fv

    fv = evaluate()
    assert xflags.model_config_from_flags(fv).scratch_units == 5  # the trained model's
    assert xflags.decode_config_from_flags(fv).scratch_search == "narrow"  # its decoding
    assert fv.scratch_rate == 0.5  # a loop setting is recorded, never restored
    assert xflags.decode_config_from_flags(evaluate("--scratch_search=wide")).scratch_search \
        == "wide"  # a decoding setting given now wins
    with pytest.raises(xflags.FlagError, match="^--scratch_units: 6 differs from the trained"):
        evaluate("--scratch_units=6")  # another model than the trained one: refused


def test_no_config_field_is_listed_by_hand_in_experiments():
    """The CLIs list no setting: the flags, the saved and the restored names all come
    from the config dataclasses (the shared ones and the tasks')."""
    import glob
    import re
    from acvi_tf.tasks.captioning import CaptioningConfig
    from acvi_tf.tasks.summarization import SummarizationConfig
    fields = {f.name for cls in (ModelConfig, TrainConfig, DecodeConfig, TranslationConfig,
                                 SummarizationConfig, CaptioningConfig)
              for f in dataclasses.fields(cls)} - {"model_dir"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for path in glob.glob(os.path.join(root, "experiments", "*.py")):
        source = open(path, encoding="utf-8").read()
        for tup in re.findall(r"^[A-Z_]+ = \(([^)]*)\)", source, re.M):
            listed = set(re.findall(r'"(\w+)"', tup)) & fields
            assert not listed, (path, sorted(listed))


# The saved settings of two runs trained before the settings were generated from the
# dataclasses (runs/table4_cpu/multi30k_soft_s1, runs/table1_cpu/pg_acvi_s3): what
# --mode=eval reads from a trained model_dir besides its checkpoints and vocabularies.
OLD_RUNS = os.path.join(os.path.dirname(__file__), "old_runs")


@pytest.mark.parametrize("name, cli", [("multi30k_soft", translate),
                                       ("cnndm_pg_acvi", summarize)])
def test_a_run_trained_before_resolves_to_its_trained_model(name, cli, tmp_path):
    import shutil
    model_dir = str(tmp_path / name)
    shutil.copytree(os.path.join(OLD_RUNS, name), model_dir)
    with open(os.path.join(model_dir, "model_config.json"), encoding="utf-8") as f:
        trained = json.load(f)
    with open(os.path.join(model_dir, "run_config.json"), encoding="utf-8") as f:
        saved = json.load(f)
    fv = _flags(cli, f"--model_dir={model_dir}", "--mode=eval")
    task_config = {translate: TranslationConfig, summarize: summarize.SummarizationConfig}[cli]
    xflags.resolve_run_flags(model_dir, "eval", cli.PROFILES, task_config, fv,
                             module=cli.MODULE)
    assert fv.profile == saved["profile"]
    task_fields = {k: trained[k] for k in ("src_vocab_size", "tgt_vocab_size", "feature_dim",
                                           "pad_id", "unk_id", "bos_id", "eos_id")}
    config = dataclasses.asdict(xflags.model_config_from_flags(fv, **task_fields))
    assert {k: config[k] for k in trained} == trained  # the model it was trained as
    decode = dataclasses.asdict(xflags.decode_config_from_flags(fv))
    # decoded as it was: the settings it recorded, and any declared after it at their
    # defaults (which decode as before)
    recorded = [k for k in decode if k in saved["flags"]]
    assert {k: saved["flags"][k] for k in recorded} == {k: decode[k] for k in recorded}
    defaults = dataclasses.asdict(DecodeConfig())
    assert {k: v for k, v in decode.items() if k not in recorded} == \
        {k: defaults[k] for k in decode if k not in recorded}
    data = xflags.config_from_flags(task_config, fv)
    defaults = {f.name: f.default for f in dataclasses.fields(task_config)}
    for flag in xflags.task_flags(task_config, xflags.RESTORED, xflags.ADOPTED):
        # on the data it was; a setting declared after the run at its default (e.g.
        # --phase_steps: the curriculum over every step, as the run was trained)
        assert getattr(data, flag) == saved["flags"].get(flag, defaults[flag]), flag
