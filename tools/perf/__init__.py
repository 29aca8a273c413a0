"""Performance figures for ``make perf``: the harness's load path beside a peer tool, timing fidelity, analysis.

``python -m tools.perf`` (:mod:`.cli`) runs everything and prints one table (:mod:`.table`), also written to
``results/perf-<timestamp>.md``. Module map: ``procs`` (process-tree CPU sampling, core pinning), ``server``
(the fast and paced simulators), ``model`` (workload, per-run figures), ``harness_client`` (the harness's
``run_step`` under test), ``peer_vllm`` / ``peer_setup`` / ``tokenizer`` (``vllm bench serve`` in its own
venv), ``capacity`` (sections 1 and 2: runs), ``rows`` (their table rows), ``benches`` (the analysis, trace,
report and simulator benches), ``profile`` (py-spy summary when the efficiency goal is missed). See
``docs/perf.md``.
"""
