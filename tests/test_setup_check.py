"""make install's set-up check names what is missing and the command that fixes it."""

from acvi_tf import setup_check
from acvi_tf.metrics import meteor, rouge


def test_missing_perl_module_is_named_with_the_apt_command(monkeypatch, capsys):
    monkeypatch.setattr(rouge, "missing_requirements",
                        lambda: "ROUGE-1.5.5 cannot load its Perl modules: Can't locate "
                                "XML/Parser.pm")
    monkeypatch.setattr(meteor, "missing_requirements", lambda: None)
    assert setup_check.main([]) == 0  # never fails the install
    out = capsys.readouterr().out
    assert "MISSING  ROUGE-1.5.5" in out and "XML/Parser.pm" in out
    assert "apt-get install -y --no-install-recommends perl libxml-parser-perl" in out
    assert "ok       METEOR" in out
    assert setup_check.main(["--strict"]) == 1


def test_missing_mirror(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("ACVI_DATA_MIRROR", str(tmp_path / "nowhere"))
    setup_check.report()
    assert "MISSING  the data mirror" in capsys.readouterr().out


def test_the_gpus_tensorflow_sees_are_listed(monkeypatch, capsys):
    from acvi_tf.utils import gpus
    monkeypatch.setattr(gpus, "visible_gpus", lambda: [
        "/physical_device:GPU:0 (NVIDIA H100 80GB HBM3, compute capability 9.0)"])
    setup_check.report()
    out = capsys.readouterr().out
    assert "ok       GPUs TensorFlow sees: 1" in out and "NVIDIA H100" in out
    monkeypatch.setattr(gpus, "visible_gpus", lambda: [])
    assert setup_check.main(["--strict"]) in (0, 1)  # no GPU is no failure of its own
    out = capsys.readouterr().out
    assert "GPUs TensorFlow sees: none" in out and 'pip install -e ".[gpu]"' in out
    assert "MISSING  GPUs" not in out


def test_no_gpu_is_not_missing(monkeypatch):
    from acvi_tf.utils import gpus
    monkeypatch.setattr(gpus, "visible_gpus", lambda: [])
    monkeypatch.setattr(setup_check, "checks", lambda: [])
    assert setup_check.main(["--strict"]) == 0
