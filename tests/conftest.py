"""Shared test set-up: quiet TensorFlow, tiny sizes."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def pytest_terminal_summary(terminalreporter):
    """Skipped tests grouped by their reason, with the command that enables the metric ones."""
    import collections
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    counts = collections.Counter()
    for report in skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        counts[reason.removeprefix("Skipped: ")] += 1
    terminalreporter.section("skipped tests by cause")
    for reason, n in counts.most_common():
        terminalreporter.write_line(f"{n:4d}  {reason}")
    if any(word in r for r in counts for word in ("perl", "Perl", "java", "ROUGE", "METEOR")):
        terminalreporter.write_line("metric tools missing: `python -m acvi_tf.setup_check` "
                                    "prints the command that installs them")
