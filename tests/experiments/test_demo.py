"""The quick start (``make demo``, experiments/tables/demo.py): its table shows only the
rows it ran, compares the 500 decoded test sentences with the same 500 references, and
ends with example translations and the attention heat map. CI runs the real target."""

import json
import os
import sys

from experiments.tables import demo, preflight, runner

SOURCES = ["a man rides a red bike .", "two dogs play in the snow .", "a girl reads a book .",
           "the cat sleeps on a chair ."]
REFS = ["ein mann fährt ein rotes rad .", "zwei hunde spielen im schnee .",
        "ein mädchen liest ein buch .", "die katze schläft auf einem stuhl ."]


def _decode(root, name, lines):
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "decode_test.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_examples_show_source_reference_and_every_models_translation(tmp_path):
    _decode(tmp_path, "multi30k_soft", ["ein mann fährt .", "zwei hunde .", "ein mädchen .",
                                        "katze ."])
    _decode(tmp_path, "multi30k_acvi", ["ein mann fährt rad .", "hunde spielen .",
                                        "ein mädchen liest .", "die katze ."])
    lines = demo.examples(str(tmp_path), SOURCES, REFS)
    assert lines[0].startswith("## Example translations")
    assert lines[2:6] == [f"1. source: {SOURCES[0]}", f"   - reference: {REFS[0]}",
                          "   - Soft attention: ein mann fährt .",
                          "   - ACVI (ours): ein mann fährt rad ."]
    assert f"3. source: {SOURCES[2]}" in lines and "   - ACVI (ours): ein mädchen liest ." in lines
    assert not any(line.startswith("4. ") for line in lines)  # three examples


# A stand-in for a demo run: a results.json of a run that decoded the first 3 of the 4
# test sentences, as --max_eval_lines does, and its decode.
FAKE_RUN = (
    "import json, os, sys\n"
    "args = dict(a[2:].split('=', 1) for a in sys.argv[1:] if '=' in a)\n"
    "d = args['model_dir']\n"
    "os.makedirs(d, exist_ok=True)\n"
    "system = {'multi30k_copy': 'copy-source', 'multi30k_soft': 'soft'}.get(\n"
    "    os.path.basename(d), 'acvi')\n"
    "cmd = ' '.join(['python', '-m', 'experiments.translate'] + sys.argv[1:])\n"
    "lines = {'soft': ['ein mann .', 'zwei hunde .', 'ein buch .'],\n"
    "         'acvi': ['ein mann fährt ein rotes rad .', 'zwei hunde spielen im schnee .',\n"
    "                  'ein mädchen liest ein buch .'],\n"
    "         'copy-source': ['a man', 'two dogs', 'a girl']}[system]\n"
    "json.dump({'task': 'translate', 'system': system, 'profile': 'cpu', 'steps': 10,\n"
    "           'dataset': 'multi30k', 'src': 'en', 'tgt': 'de', 'decode': {'beam_width': 1},\n"
    "           'bleu': {'dev': 10.0, 'test': 12.0}, 'command': cmd, 'train_command': cmd,\n"
    "           'splits': {'test': {'sentences': 3}}},\n"
    "          open(os.path.join(d, 'results.json'), 'w'))\n"
    "open(os.path.join(d, 'decode_test.txt'), 'w').write('\\n'.join(lines) + '\\n')\n")


def test_the_demo_ends_with_its_table_examples_and_heat_map(tmp_path, monkeypatch):
    """``tables run demo``: the three runs (two at once), a table of only those rows with
    the bootstrap on the decoded subset (it raised on 500 of 1,000 before), then the
    examples and the heat map's path, all in the written markdown."""
    fake = tmp_path / "fake_run.py"
    fake.write_text(FAKE_RUN)
    real_plan = runner.plan
    monkeypatch.setattr(runner, "plan", lambda *a, **kw: [
        (n, [sys.executable, str(fake)] + argv[3:], d, s) for n, argv, d, s in real_plan(*a, **kw)])
    monkeypatch.setitem(preflight.CHECKS, "translate", lambda *a: True)
    import acvi_tf.data.translation as translation_data
    monkeypatch.setattr(translation_data, "references",
                        lambda dataset, split, lang, variant="tok": SOURCES if lang == "en" else REFS)
    drawn = []

    def heatmap(runs_root, source, out_dir, stream=None):
        drawn.append((runs_root, source, out_dir))
        os.makedirs(out_dir, exist_ok=True)
        png = os.path.join(out_dir, "attention_0000.png")
        open(png, "wb").close()
        return png
    monkeypatch.setattr(demo, "attention_heatmap", heatmap)
    runs_root, out = tmp_path / "runs", tmp_path / "results" / "demo.md"
    assert runner.run_table("demo", str(runs_root), str(out), parallel=2) == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Demo:") and "not a result" in text.split("\n")[0]
    rows = [line.split("|")[1].strip() for line in text.split("\n")
            if line.startswith("| ") and not line.startswith("| Method")]
    assert rows == ["Copy the source (floor)", "Baseline (soft attention)", "ACVI"]
    acvi_row = next(line for line in text.split("\n") if line.startswith("| ACVI "))
    assert "1 seed pair, first 3 sentences)" in acvi_row
    assert "2. source: two dogs play in the snow ." in text
    assert "   - ACVI (ours): zwei hunde spielen im schnee ." in text
    assert drawn == [(str(runs_root), SOURCES[0], str(tmp_path / "results" / "demo_attention"))]
    assert "![ACVI's attention a_t^i on test sentence 1](demo_attention/attention_0000.png)" in text
    assert json.loads((runs_root / "multi30k_acvi" / "results.json").read_text())["system"] == "acvi"
