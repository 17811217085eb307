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
