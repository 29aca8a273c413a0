"""``python -m tools.decision_bench``."""

import sys

from tools.decision_bench.run import main

sys.exit(main())
