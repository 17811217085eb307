"""Running a CLI (``python -m experiments.X ...``) from a test, without paying for the
TensorFlow import each time.

A CLI run in a subprocess spends about 5 CPU-seconds importing TensorFlow, Keras and
TensorFlow Probability before it reads its first flag; the end-to-end tests make over
a hundred such runs. :func:`run` gives the same thing for less: each call is a fresh
process, forked from a multiprocessing fork server that imported those libraries once
(and ran no TensorFlow op, so the fork carries no runtime state). In the child the
CLI module runs as ``__main__`` exactly as ``python -m`` runs it, with the caller's
argv, environment, working directory and stdin, and its stdout and stderr (file
descriptors 1 and 2, so TensorFlow's own logging too) are captured. The result is a
:class:`subprocess.CompletedProcess`, as ``subprocess.run(..., capture_output=True,
text=True)`` returns it.

The child runs TensorFlow as conftest does in the test processes (tests/tf_settings.py:
Grappler off, no Python stack kept per graph op; Grappler alone: one smoke translate
run, train + eval + decode, 14.7 -> 12.1 CPU-seconds); it also inherits
conftest's TEST_ENV (oneDNN off, one thread per pool) from the fork server. A run that sets
``ACVI_TEST_AS_RUN=1`` in its environment runs as a user runs it instead: a fresh
interpreter (``subprocess.run``), Grappler and oneDNN on.

:func:`start` forks a run without waiting for it (the TF_CONFIG workers of a
multi-worker test run side by side: the fork server never started TensorFlow's runtime,
so each child starts its own). A test that must prove something about a genuinely new
interpreter sets ``ACVI_TEST_AS_RUN=1`` or uses :mod:`subprocess`.
"""

import atexit
import multiprocessing
import os
import resource
import runpy
import subprocess
import sys
import tempfile
import traceback
import types

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Imported once in the fork server. No acvi_tf or experiments module: the CLI must
# import its own code in the child, as `python -m` does (and define its flags once).
# TensorBoard's hparams API (with the boto3 it pulls in) is imported by every run's
# results code: 0.13 s a run, ~100 runs a suite.
PRELOAD = ["numpy", "tensorflow", "keras", "tensorflow_probability", "sacrebleu",
           "tensorboard.plugins.hparams.api"]

_context = None
# CPU seconds (user + system) of every CLI run so far in this process, for conftest's
# ACVI_TEST_CPU report: the children are the fork server's, so no rusage reaches pytest.
child_cpu_seconds = 0.0


def _fork_context():
    global _context
    if _context is None:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # read once, at TF's import
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


def _exit_code(code):
    """What the interpreter does with ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _child(module, args, env, cwd, stdin_path, out_path, err_path):
    """Runs in the forked child: ``python -m module *args`` (``python module *args`` for
    a ``.py`` path) with fds 0-2 redirected."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    for fd, path, mode in ((0, stdin_path, os.O_RDONLY),
                           (1, out_path, os.O_WRONLY | os.O_TRUNC),
                           (2, err_path, os.O_WRONLY | os.O_TRUNC)):
        handle = os.open(path, mode)
        os.dup2(handle, fd)
        os.close(handle)
    sys.stdin = open(0, encoding="utf-8", closefd=False)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False, buffering=1)
    script = module.endswith(".py")
    # sys.path[0] as python sets it: the script's folder, or the working directory for -m
    sys.path[:0] = [os.path.dirname(os.path.abspath(module)) if script else cwd] + [
        p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.argv = [module] + list(args)
    if not env.get("ACVI_TEST_AS_RUN"):
        from tests import tf_settings  # TensorFlow is preloaded: no import cost
        tf_settings.apply()
    try:
        if script:
            runpy.run_path(module, run_name="__main__")
        else:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = _exit_code(e.code)
    except BaseException:  # noqa: BLE001  (an uncaught error: traceback and exit 1)
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()  # the interpreter's exit, which os._exit below skips
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        _write_cpu(os.path.join(os.path.dirname(out_path), "cpu"))
        os._exit(code)


def _write_cpu(path):
    try:
        # its own CPU and its waited-for children's (a benchmark's workers, ROUGE's Perl)
        cpu = sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                    resource.getrusage(resource.RUSAGE_CHILDREN)))
        with open(path, "w") as f:
            f.write(repr(cpu))
    except OSError:
        pass


def _add_cpu(path):
    global child_cpu_seconds
    try:
        with open(path) as f:
            child_cpu_seconds += float(f.read())
    except (OSError, ValueError):
        pass


def run(module, args, env=None, cwd=REPO, input=None, timeout=900):
    """``subprocess.run([python, "-m", module, *args], env=env, cwd=cwd, input=input,
    capture_output=True, text=True, timeout=timeout)``, in a process forked from the
    preloaded fork server; a ``module`` ending in ``.py`` is a script path, run as
    ``python module *args``."""
    env = dict(os.environ if env is None else env)
    if env.get("ACVI_TEST_AS_RUN"):
        return _run_fresh(module, args, env, cwd, input, timeout)
    return start(module, args, env, cwd, input).wait(timeout)


class Started:
    """A CLI run started by :func:`start`; :meth:`wait` gives its ``CompletedProcess``."""

    def __init__(self, module, args, env, cwd, input):
        self.argv = _argv("python", module, args)
        self._tmp = tempfile.TemporaryDirectory(prefix="cli_")
        self._paths = [os.path.join(self._tmp.name, name)
                       for name in ("stdin", "stdout", "stderr")]
        for path, text in zip(self._paths, (input or "", "", "")):
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        self._proc = _fork_context().Process(target=_child,
                                             args=(module, list(args), env, cwd, *self._paths))
        # multiprocessing would re-run the caller's __main__ (a script, pytest) in the
        # child to "prepare" it; the child needs nothing of it.
        main, sys.modules["__main__"] = sys.modules["__main__"], types.ModuleType("__main__")
        try:
            self._proc.start()
        finally:
            sys.modules["__main__"] = main

    def wait(self, timeout=900):
        try:
            self._proc.join(timeout)
            if self._proc.exitcode is None:
                self._proc.kill()
                self._proc.join()
                raise subprocess.TimeoutExpired(self.argv, timeout)
            out, err = (open(p, encoding="utf-8").read() for p in self._paths[1:])
            _add_cpu(os.path.join(self._tmp.name, "cpu"))
        finally:
            self._tmp.cleanup()
        return subprocess.CompletedProcess(self.argv, self._proc.exitcode, out, err)


def start(module, args, env=None, cwd=REPO, input=None):
    """:func:`run` without waiting: the run goes on beside the caller (several workers of
    one job, say) until ``.wait()``."""
    return Started(module, args, dict(os.environ if env is None else env), cwd, input)


def _argv(python, module, args):
    """``python -m module *args``, or ``python module *args`` for a ``.py`` script."""
    return [python] + ([] if module.endswith(".py") else ["-m"]) + [module] + list(args)


def _run_fresh(module, args, env, cwd, input, timeout):
    """The CLI in a new interpreter with TensorFlow's defaults: conftest's TEST_ENV
    is taken out of its environment (Grappler is on unless the child turns it off)."""
    if env.get("ACVI_TEST_ENV"):
        gone = set(env["ACVI_TEST_ENV"].split(",")) | {"ACVI_TEST_ENV"}
        env = {k: v for k, v in env.items() if k not in gone}
    # its CPU time reaches conftest's ACVI_TEST_CPU report as any subprocess's does
    r = subprocess.run(_argv(sys.executable, module, args), env=env, cwd=cwd, input=input,
                       capture_output=True, text=True, timeout=timeout)
    r.args = _argv("python", module, args)
    return r
