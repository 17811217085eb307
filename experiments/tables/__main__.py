"""``python -m experiments.tables ...`` (see :mod:`experiments.tables.runner`)."""

import sys

from experiments.tables.runner import main

sys.exit(main())
