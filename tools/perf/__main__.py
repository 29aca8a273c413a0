"""``python -m tools.perf``: see :mod:`tools.perf.cli`."""

import sys

from tools.perf.cli import main

sys.exit(main())
