"""Reports rendered from a run's :class:`~harness.schema.summary.Summary`: summary.json, summary.md, junit.xml,
report.html, plus ``harness compare`` and the results index. Templates live in ``harness/templates`` (installed
with the package).

Entry points (import from the submodules; this package imports nothing so the CLI starts fast):

* :func:`harness.report.writers.write_reports`, :func:`~harness.report.writers.render_run`,
  :data:`~harness.report.writers.WRITERS`, :func:`~harness.report.writers.summary_json_text`
* :func:`harness.report.index.write_index`
* :func:`harness.report.compare.compare_summaries`
* :mod:`harness.report.commands`: ``report_command``, ``make_report_command``, ``compare_command``, ``index_command``

Sample summaries for tests live outside the package (``tests/support/sample.py``); the render benchmark is
``python -m tools.bench.report``.
"""
