"""Trace analysis: read request traces, measure prefix reuse and compute exact LRU hit-ratio curves.

Modules, one job each:

- ``mooncake``  read/write/synthesise Mooncake JSONL traces (also used by the load generator for replay)
- ``mooncake_columns`` Mooncake JSONL straight to blocks via pyarrow, falling back to the exact reader
- ``readers``   other trace formats (a run's ``requests.parquet``, prompt text) and format detection
- ``blocks``    the columnar block trace every analysis works on
- ``lru_curve`` one-pass stack distances and the exact LRU prefix-cache hit curve
- ``bruteforce`` a slow reference LRU prefix-cache simulator (tests compare the curve against it)
- ``units``     KV bytes per token (model profiles) and capacity parsing
- ``tiers``     GPU + CPU (+ disk) splits read off the curve
- ``analysis``  reuse statistics, the curve summary and the ``--json`` document
- ``html``      the self-contained HTML report
- ``cli``       the ``harness analyze-trace`` command

Its ``make perf`` benchmark is ``python -m tools.bench.trace`` (outside the package).
"""
