"""``python -m harness.decision_bench``."""

import sys

from harness.decision_bench.run import main

sys.exit(main())
