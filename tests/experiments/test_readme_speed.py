"""The README's speed lines are generated from the benchmarks' result files (issue 35):
each figure is the file's own ratio, judged against issue 35's target, with the command
that measured it and the run's commit and load."""

import json
import os

from experiments import readme_speed


def _write(root, name, data):
    os.makedirs(os.path.join(root, "results"), exist_ok=True)
    with open(os.path.join(root, "results", f"{name}.json"), "w", encoding="utf-8") as f:
        json.dump(data, f)


def _peers(tokens, sentences, argv=()):
    return {"argv": ["--peer_python", ".venv-peers/bin/python", *argv],
            "date": "2026-11-29T05:14:48+00:00",
            "machine": {"cpu_model": "Test CPU"},
            "code": {"commit": "a" * 40, "dirty": False},
            "load_average": {"others_cores_during_timing": 0.004},
            "ratios": {"tokens_per_s": tokens, "sentences_per_s": sentences}}


def test_each_figure_comes_from_its_file_with_its_target_and_command(tmp_path):
    root = str(tmp_path)
    _write(root, "bench_peers", _peers(1.234, 1.19))
    _write(root, "bench_peers_bf16", _peers(1.51, 1.0, ["--precision=mixed_bfloat16"]))
    _write(root, "bench_peers_train", {
        "command": "python -m benchmarks.peers.train_e2e --peer_python .venv-peers/bin/python",
        "date": "2026-11-29T05:28:09+00:00", "code": {"commit": "b" * 40, "dirty": True},
        "others_cores_during_timing": 0.1,
        "sides": {"ours": {"target_tokens_per_s": 2400.0},
                  "opennmt-tf": {"target_tokens_per_s": 2000.0}}})
    rows = [{"size": size, "variant": variant, "xla": xla,
             "ratio_to_soft": 1.0 if variant == "soft" else ratio}
            for size, ratios in (("translation", (1.05, 1.2)), ("summarization", (1.3, 1.1)))
            for xla, ratio in zip((False, True), ratios) for variant in ("soft", "acvi")]
    _write(root, "bench_acvi_soft", {"argv": ["--profile=full", "--variants=soft,acvi"],
                                     "machine": {"cpu_model": "Test CPU",
                                                 "date": "2026-11-29T05:28:17+00:00"},
                                     "code": {"commit": "c" * 40, "dirty": False},
                                     "train": rows})
    lines = readme_speed.speed(root)
    table = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1:] for line in lines
             if line.startswith("| ") and "figure" not in line}
    beam = table["beam search, ours / OpenNMT-tf sentences/s, fp32"]
    assert beam == ["1.19", ">= 1.20 (not met)", "`make bench-peers` |"]
    assert table["training step, ours / OpenNMT-tf tokens/s, fp32"][:2] == ["1.23",
                                                                            ">= 1.20 (met)"]
    bf16 = table["training step, ours bf16 / OpenNMT-tf fp32 tokens/s"]
    assert bf16 == ["1.51", ">= 1.50 (met)",
                    '`make bench-peers PEERS_ARGS="--precision=mixed_bfloat16"` |']
    e2e = table["end-to-end Multi30k training with our defaults, tokens/s ratio"]
    assert e2e == ["1.20", ">= 1.20 (met)", "`make bench-peers-train` |"]
    mt = next(v for k, v in table.items() if "ACVI" in k and "MT size" in k)
    assert mt[:2] == ["1.05 / 1.20", "<= 1.10 (met / not met)"]
    assert mt[2] == "`python -m benchmarks.bench --profile=full --variants=soft,acvi` |"
    summ = next(v for k, v in table.items() if "ACVI" in k and "summarization" in k)
    assert summ[:2] == ["1.30 / 1.10", "<= 1.10 (not met / met)"]
    text = "\n".join(lines)
    assert "`results/bench_peers.json`: 2026-11-29 05:14 UTC, commit aaaaaaa, Test CPU; " \
           "other processes 0.004 cores while timing" in text
    assert "commit bbbbbbb + uncommitted changes" in text


def test_missing_files_leave_their_rows_out(tmp_path):
    root = str(tmp_path)
    assert "No benchmark results" in readme_speed.speed(root)[0]
    _write(root, "bench_peers", _peers(1.0, 1.0))
    text = "\n".join(readme_speed.speed(root))
    assert "bench_peers_bf16" not in text and "ACVI" not in text
    assert "beam search, ours / OpenNMT-tf sentences/s, fp32 | 1.00" in text
