"""Metrics scraping: raw scrapes on disk, metric catalogs, canonical per-step quantities (counter deltas, histograms).

Modules: ``scraper`` (poll endpoints into ``metrics/<arm>/scrapes.jsonl.gz``), ``rawlog`` (the durable file format),
``catalog`` (real series names per engine release -> canonical quantities; data in ``harness/engines/catalogs``),
``parse`` (Prometheus text via prometheus_client, TensorRT-LLM JSON), ``series`` (scrapes read back, step windows),
``deltas`` (reset-robust increases, histogram quantiles), ``quantities`` (catalog evaluation), ``samples`` (per-step
``ServerStep`` / ``HitTokens``), ``timeline`` (``samples.parquet``). See docs/metrics.md.
"""
