"""Shared test set-up: quiet TensorFlow, tiny sizes."""

import atexit
import os
import shutil
import tempfile

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# TensorFlow as the test processes run it, set before TensorFlow is imported (after this
# file); the CLI runs inherit it through tests/cli.py's fork server, and one with
# ACVI_TEST_AS_RUN=1 runs with TensorFlow's defaults instead, as users do (ACVI_TEST_ENV
# names what to take out). Neither changes a result beyond float round-off:
# * oneDNN off: it builds a kernel primitive for every new op shape, which at the tests'
#   sizes costs more than the op (measured: tests/models/test_seq2seq.py 60.2 -> 53.4
#   CPU-s).
# * one intra-op and one inter-op thread: the two pytest workers already fill the 2 cores,
#   and the tiny ops gain nothing from a pool whose threads spin waiting for work (4 test
#   files with -n 2, 2026-11-27: 195.7 -> 181.1 CPU-s, 131.7 -> 124.2 s).
TEST_ENV = {"TF_ENABLE_ONEDNN_OPTS": "0", "TF_NUM_INTRAOP_THREADS": "1",
            "TF_NUM_INTEROP_THREADS": "1"}
_set = [k for k in TEST_ENV if k not in os.environ]
if _set:
    os.environ.update({k: TEST_ENV[k] for k in _set}, ACVI_TEST_ENV=",".join(_set))

if os.environ.get("PYTEST_XDIST_WORKER"):
    import sys

    def _exit_without_finalizing():
        """The last exit handler of a pytest-xdist worker (registered first, so run last):
        by then the worker has sent its results and been told to stop, and every other
        handler has run (the fork server's shutdown among them). Skipping the interpreter's
        teardown of a heap that holds hundreds of traced TensorFlow graphs saves the
        suite's tail seconds of wall time (the run's exit status is the controller's)."""
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    atexit.register(_exit_without_finalizing)

# The tables' disk cache of bootstrap results (acvi_tf/utils/disk_cache.py): a fresh one
# per test process, so that no test reads what a user's renders (or an earlier test run)
# stored, and none writes into the user's ~/.cache (registered after the worker's
# exit handler above, so removed before it runs).
os.environ["ACVI_CACHE_DIR"] = tempfile.mkdtemp(prefix="acvi_test_cache_")
atexit.register(shutil.rmtree, os.environ["ACVI_CACHE_DIR"], True)


def pytest_configure(config):
    """In a pytest-xdist worker, one garbage collection instead of pytest's five when the
    session ends, before it reports exceptions raised in finalizers: each pass walks the
    heap the suite built (1 CPU-second each at the end, measured), and one pass collects
    what the next four would (Trio's constant, which pytest uses, is for other heaps)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        try:
            from _pytest.unraisableexception import gc_collect_iterations_key
        except ImportError:  # a pytest without the knob: its default stays
            return
        config.stash[gc_collect_iterations_key] = 1


@pytest.fixture(scope="session", autouse=True)
def tensorflow_for_tests():
    """Grappler off and no Python stack kept per graph op (tests/tf_settings.py): tracing
    and first running a tf.function is most of what the tests cost."""
    from tests import tf_settings
    tf_settings.apply()


def pytest_collection_finish(session):
    """Python's garbage collector, tuned for a process that holds TensorFlow: the imports
    and the collected tests (millions of objects) move to the permanent generation, and
    collections run a fourteenth as often. Full collections, which walked that whole heap
    every few seconds, were 6% of a test file's CPU time (tests/models + tests/attention:
    10.2 -> 5.7 CPU-s of GC; peak memory +5%)."""
    import gc
    gc.collect()
    gc.freeze()
    gc.set_threshold(10000, 10, 10)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, the test files in one slice of equal CPU per worker, each
    heaviest first, by tests/durations.json (tests/durations.py says why);
    ACVI_TEST_ORDER=files keeps the files' own order."""
    if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("ACVI_TEST_ORDER") != "files":
        from tests import durations
        workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        items[:] = durations.order(items, durations.load(), workers)


# A test that checked a declared refusal (tests/experiments/test_every_variant.py: a
# combination the code refuses, with the message it must refuse it with) records this
# user property; it is counted as "refused" in the summary line, apart from the passed
# and the skipped tests.
REFUSED_AS_DECLARED = "refused_as_declared"


def _refused_as_declared(report):
    return report.when == "call" and report.passed and any(
        key == REFUSED_AS_DECLARED for key, _ in getattr(report, "user_properties", ()))


def pytest_report_teststatus(report, config):
    """Declared refusals: their own category ("refused", letter "r") in the summary line."""
    if _refused_as_declared(report):
        return "refused", "r", "REFUSED AS DECLARED"
    return None


def pytest_terminal_summary(terminalreporter):
    """Declared refusals grouped by message; skipped tests grouped by their reason, with the
    command that enables the metric ones."""
    import collections
    refused = [r for r in terminalreporter.stats.get("refused", []) if _refused_as_declared(r)]
    if refused:
        counts = collections.Counter(value for r in refused
                                     for key, value in r.user_properties
                                     if key == REFUSED_AS_DECLARED)
        terminalreporter.section("refused as declared (not skips: each refusal checked)")
        for message, n in sorted(counts.items()):
            terminalreporter.write_line(f"{n:4d}  {message}")
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


if os.environ.get("ACVI_TEST_CPU"):
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        """With ACVI_TEST_CPU=FILE, append each test's CPU seconds (every thread of the
        pytest process, set-up and tear-down included) and wall seconds to FILE: the CPU
        time is what a test costs on idle cores, measurable while other work shares the
        machine (wall-clock durations are not). The CLI runs tests/cli.py forks report
        their own CPU, and the subprocesses a test waits for theirs (RUSAGE_CHILDREN),
        added here."""
        import json
        import resource
        import time
        from tests import cli

        def cpu_now():
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            return (time.process_time() + cli.child_cpu_seconds
                    + children.ru_utime + children.ru_stime)
        start, wall = cpu_now(), time.perf_counter()
        began = time.time()
        yield
        cpu = cpu_now() - start
        with open(os.environ["ACVI_TEST_CPU"], "a") as f:
            f.write(json.dumps({"test": item.nodeid,
                                "cpu_seconds": round(cpu, 2),
                                "wall_seconds": round(time.perf_counter() - wall, 2),
                                # when and where it ran: the suite's timeline (idle
                                # workers, the tail) is read from these
                                "start": round(began, 2),
                                "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")})
                    + "\n")
