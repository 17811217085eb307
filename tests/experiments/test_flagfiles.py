"""Every flagfile under experiments/configs/ parses with its task CLI and builds its model.

A typo in a flagfile (an unknown flag, a bad enum value, an option the variant does not
take, a combination the model refuses) fails here, not hours into a table run. Each
file goes through what its CLI does before training: a fresh ``FlagValues`` with the
CLI's flags, ``--flagfile=``, the profile (:func:`xflags.apply_profile`), the CLI's
``check_flags``, then the task's ``model_config`` and ``acvi_tf.models.build_model`` (Keras
builds weights lazily, so a paper-size model costs nothing here).
"""

import glob
import json
import os
import types

import pytest
from absl import flags

from experiments import caption, run_modes, summarize, tables, translate
from experiments import flags as xflags
from acvi_tf.models import build_model
CONFIGS = sorted(glob.glob(os.path.join(tables.CONFIG_DIR, "*.flags")))
# The ACVI study's rows that no table runs yet (experiments/acvi_study.py): parsed and
# built like the others, not required to be in a table.
STUDY_CONFIGS = sorted(glob.glob(os.path.join(tables.CONFIG_DIR, "study", "*.flags")))
# File name prefix -> the CLI that reads it.
CLI_OF = (("table4", translate), ("table3", caption), ("table1", summarize),
          ("table5", summarize))


def cli_for(path):
    name = os.path.basename(path)
    for prefix, module in CLI_OF:
        if name.startswith(prefix):
            return module
    raise AssertionError(f"{name}: no task CLI for this file name (add its prefix to CLI_OF)")


def parse(module, argv):
    fv = flags.FlagValues()
    module.define_flags(fv)
    fv(["prog"] + list(argv))
    xflags.apply_profile(module.PROFILES, fv)
    module.check_flags(fv)
    return fv


# What every flagfile resolved to at the commit before the settings were generated from the
# config dataclasses (issue 36): the settings its run saves in run_config.json.
SETTINGS = os.path.join(os.path.dirname(__file__), "flagfile_settings.json")


def saved_settings(module, fv, model_dir):
    """The settings a run of these flags saves (run_config.json's ``flags``)."""
    run_modes.save_settings(module.CLI, model_dir,
                            {"src": "en", "tgt": "de"} if module is translate else {}, fv)
    with open(os.path.join(model_dir, "run_config.json"), encoding="utf-8") as f:
        return json.load(f)["flags"]


def model_config(module, fv):
    """The task's model config of these flags, over stand-in data of the task's sizes."""
    from acvi_tf.data.vocab import Vocab
    from acvi_tf.tasks import captioning, summarization, translation
    arch = xflags.model_config_from_flags(fv)
    if module is translate:
        vocab = types.SimpleNamespace(src_vocab=range(100), tgt_vocab=range(100))
        return translation.model_config(arch, vocab)
    if module is caption:
        return captioning.model_config(arch, types.SimpleNamespace(dim=1024, vocab=range(100)))
    return summarization.model_config(arch, Vocab([f"w{i}" for i in range(96)]))


def test_the_parametrized_flagfiles_are_every_flagfile_on_disk_and_every_table_row():
    """The flagfiles the test below parses are exactly the ``*.flags`` files under
    experiments/configs, at any depth (listed here with os.walk), and they include the
    flagfile of every table row and of the ACVI study grid: none is left unparsed."""
    parametrized = {os.path.relpath(p, tables.CONFIG_DIR) for p in CONFIGS + STUDY_CONFIGS}
    on_disk = {os.path.relpath(os.path.join(d, f), tables.CONFIG_DIR)
               for d, _, files in os.walk(tables.CONFIG_DIR) for f in files
               if f.endswith(".flags")}
    assert parametrized == on_disk
    named = {flagfile for runs in tables.TABLES.values() for _, flagfile, _ in runs if flagfile}
    assert named and named <= parametrized, sorted(named - parametrized)
    from experiments.acvi_study import grid
    repo = os.path.dirname(os.path.dirname(tables.CONFIG_DIR))
    study = {os.path.relpath(os.path.join(repo, path), tables.CONFIG_DIR)
             for path in (grid.MULTI30K_PAPER, grid.CNNDM_PAPER)}
    assert study <= parametrized, sorted(study - parametrized)


@pytest.mark.parametrize("path", CONFIGS + STUDY_CONFIGS,
                         ids=[os.path.basename(p) for p in CONFIGS + STUDY_CONFIGS])
def test_flagfile_parses_with_its_cli_and_builds_its_model(path, tmp_path):
    with open(path, encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    assert lines[0].startswith("#"), f"{path}: start with a comment saying which row it is"
    for line in lines:
        assert not line or line.startswith("#") or line.startswith("--"), (path, line)
    module = cli_for(path)
    fv = parse(module, [f"--flagfile={path}"])
    assert fv.profile in module.PROFILES
    config = model_config(module, fv)
    build_model(config)  # a ValueError here: the model refuses these settings
    # every setting resolves as before (a setting added since may be new; a flagfile
    # added since has no "before")
    with open(SETTINGS, encoding="utf-8") as f:
        before = json.load(f).get(os.path.relpath(path, tables.CONFIG_DIR))
    if before is not None:
        now = saved_settings(module, fv, str(tmp_path))
        assert {k: now.get(k, "<gone>") for k in before} == before
    if fv.model_dir:  # a table row writes where the tables expect it
        stem = os.path.basename(path)[:-len(".flags")]
        assert fv.model_dir.startswith("runs/"), (path, fv.model_dir)
        assert os.path.basename(fv.model_dir) in stem or stem.endswith(
            os.path.basename(fv.model_dir)), (path, fv.model_dir)


def test_a_typo_in_a_flagfile_fails(tmp_path):
    bad = tmp_path / "table4_typo.flags"
    bad.write_text("# a typo\n--profile=paper\n--atention=acvi\n")
    with pytest.raises(flags.Error, match="atention"):
        parse(translate, [f"--flagfile={bad}"])
    bad.write_text("# a bad option\n--profile=paper\n--attention=acvi\n"
                   "--attention_option=kl_wieght=0.5\n")
    with pytest.raises(xflags.FlagError, match="kl_wieght"):
        parse(translate, [f"--flagfile={bad}"])
    bad.write_text("# refused by the model\n--profile=paper\n--model=transformer\n"
                   "--attention=structured\n")
    # the model's own rule, applied when the flags are checked (before anything runs)
    with pytest.raises(xflags.FlagError, match="^--model: transformer: --attention apply"):
        parse(translate, [f"--flagfile={bad}"])


def test_every_table_flagfile_exists_and_every_flagfile_is_in_a_table():
    used = set()
    for table, runs in tables.TABLES.items():
        for name, flagfile, _ in runs:
            if flagfile:
                assert os.path.exists(os.path.join(tables.CONFIG_DIR, flagfile)), (table, name)
                used.add(flagfile)
    unused = {os.path.basename(p) for p in CONFIGS} - used
    assert not unused, f"flagfiles no table runs: {sorted(unused)}"
