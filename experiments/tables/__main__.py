"""``python -m experiments.tables ...`` (see :mod:`experiments.tables.runner`)."""

import sys

if sys.argv[1:2] == ["status"]:  # read-only and quick: no table module, no TensorFlow
    from experiments.tables.status import cli
    sys.exit(cli(sys.argv[2:]))

from experiments.tables.runner import main  # noqa: E402

sys.exit(main())
