"""``python -m harness.perf``: see :mod:`harness.perf.cli`."""

import sys

from harness.perf.cli import main

sys.exit(main())
