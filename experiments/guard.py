"""How a task CLI fails: one line naming the flag or the file at fault (a traceback only
when asked for), and the run directory's lock held while a mode writes into it."""

import functools
import os
import sys

from absl import app, flags

from acvi_tf.data.sources import DataError
from acvi_tf.errors import ConfigError, RunError
from acvi_tf.run.directory import locked_run_dir, run_segment
from acvi_tf.training.stop_signal import Interrupted
from acvi_tf.training.trainer import CheckpointError, TrainingDiverged, is_chief
from acvi_tf.utils import manifest
from acvi_tf.utils.provenance import command_line
from experiments.config_flags import FlagError
from experiments.run_settings import READ_ONLY_MODES

FLAGS = flags.FLAGS


TRACEBACK_ENV = "ACVI_TRACEBACK"  # =1: a failure's full traceback above its one line


def tracebacks_wanted(flag_values=FLAGS):
    """Whether a failure prints its full traceback as well as its one line: with
    ``--verbosity=1`` (absl's, or more) or the environment variable ``ACVI_TRACEBACK=1``."""
    if os.environ.get(TRACEBACK_ENV, "").strip().lower() not in ("", "0", "false", "no"):
        return True
    try:
        return flag_values.is_parsed() and int(flag_values["verbosity"].value or 0) >= 1
    except (KeyError, TypeError, ValueError, AttributeError):
        return False


def _print_traceback(error):
    """The full traceback of ``error``, the exception it was turned from included (a
    one-line error is raised ``from None``)."""
    import traceback
    error.__suppress_context__ = False
    print(f"(the traceback, since --verbosity>=1 or {TRACEBACK_ENV}=1:)", file=sys.stderr)
    traceback.print_exception(error, file=sys.stderr)
    sys.stderr.flush()


def cli_main(main):
    """``main`` for ``app.run``: a flag error (:class:`FlagError`, any ``app.UsageError``)
    ends in its one line, ``error: --flag: ...``, and exit code 1, not in the module's
    help with the error below it (``--helpshort`` still prints the help). Every failure
    ends in its one line (:func:`run_guarded`); with ``--verbosity=1`` or
    ``ACVI_TRACEBACK=1`` (:func:`tracebacks_wanted`) its full traceback is printed above
    that line as well."""
    @functools.wraps(main)
    def run(argv):
        try:
            return main(argv)
        except app.UsageError as e:
            if tracebacks_wanted():
                _print_traceback(e)
            print(f"error: {e}", file=sys.stderr, flush=True)
            raise SystemExit(e.exitcode or 1) from None
        except SystemExit as e:
            if e.code not in (None, 0) and tracebacks_wanted():
                _print_traceback(e)
            raise
    return run


def run_guarded(body, errors=(), model_dir=None, mode=None, module=None):
    """Runs a CLI's mode, turning the package's exceptions into the CLI's: a bad
    setting (:class:`ConfigError`) into a :class:`FlagError` naming the flag, missing
    data or files into ``error: ...`` exits. ``errors`` adds (exception types, prefix).
    A ``mode`` that writes into ``model_dir`` (every mode but decode and export) holds
    the run directory's lock (:func:`acvi_tf.run.directory.locked_run_dir`) while it
    runs, and records this start of the run, with the command of the CLI ``module``, in
    ``provenance.json`` (:func:`acvi_tf.run.directory.run_segment`)."""
    try:
        if model_dir and mode and mode not in READ_ONLY_MODES and is_chief():
            # (the other workers of a multi-worker run share the chief's model_dir and
            # write nothing into it)
            with locked_run_dir(model_dir):
                manifest.verify(model_dir)
                with run_segment(model_dir, command_line(module) if module else None, mode):
                    return body()
        if model_dir:
            manifest.verify(model_dir)
        return body()
    except ConfigError as e:
        raise FlagError(e.field, e.detail) from None
    except Interrupted as e:  # a checkpoint was saved: the shell's exit code of the signal
        print(f"{e}", file=sys.stderr, flush=True)
        raise SystemExit(e.exit_code) from None
    except DataError as e:
        raise SystemExit(f"error: data missing or malformed: {e}") from None
    except (FileNotFoundError, RunError, manifest.StoredFileError, TrainingDiverged,
            CheckpointError) as e:
        raise SystemExit(f"error: {e}") from None
    except OSError as e:
        if not e.filename:  # an OS error about no file in particular keeps its traceback
            raise
        raise SystemExit(f"error: {e.filename}: {e.strerror}") from None
    except Exception as e:  # noqa: BLE001  (only the types the CLI named)
        for types, prefix in errors:
            if isinstance(e, types):
                raise SystemExit(f"error: {prefix}{e}") from None
        raise


def check_partial_data(complete, lines, what, how_to_get, flag_values=FLAGS, extra=""):
    """Stops training on missing or partial data unless --allow_partial_data."""
    fv = flag_values
    if not complete and not fv.allow_partial_data:
        print("\n".join(lines), file=sys.stderr, flush=True)
        raise SystemExit(
            f"error: the {what} files above are missing or partial copies, and "
            f"--profile={fv.profile} needs the full data (the results would not be "
            f"comparable). Get them: {how_to_get}.{extra}")
