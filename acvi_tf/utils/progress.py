"""Progress on stderr: :func:`log` (stdout carries scores and decodes) and a
:class:`Stopwatch` for the wall times a run records."""

import sys
import time


def log(message):
    """Progress and diagnostics go to stderr (stdout carries scores and decodes)."""
    print(message, file=sys.stderr, flush=True)


class Stopwatch:
    def __init__(self):
        self.start = time.time()

    def seconds(self):
        return time.time() - self.start
