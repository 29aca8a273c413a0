"""One benchmark per stage, each ``python -m tools.bench.<name>`` (``make perf`` runs most of them, see
``docs/perf.md``): ``analysis`` (request records to step tables), ``load`` (the load generator's rate and timing),
``report`` (rendering every report), ``sim`` (the simulator's tokens/s), ``trace`` (a trace to its hit-ratio curve),
``drift`` (the results index's change-point rule on seeded histories) and ``coverage`` (``make coverage-bench``: the
ratio intervals' coverage on correlated synthetic series)."""
