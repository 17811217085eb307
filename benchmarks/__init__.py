"""The benchmarks: ``make bench`` (:mod:`benchmarks.bench`), the peer comparison
(:mod:`benchmarks.peers`) and the small studies beside them."""

import os

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
