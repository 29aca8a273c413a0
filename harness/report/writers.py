"""The report writers: a registry keyed by name, each a pure function of the summary (and the run directory).

``write_reports`` writes them all (``summary.json`` first, ``report.html`` last so its raw-file links see the
others); each file is written to a temporary name and renamed, so a crash never leaves half a report. A file that
cannot be written (disk full, read-only) is a :class:`~harness.rundir.errors.ReportWriteError` naming it and saying
which files were replaced before it and which are as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from harness.core.atomic import write_text_atomic
from harness.report.junit import render_junit
from harness.report.load import check_run_dir, load_summary
from harness.report.markdown import render_markdown
from harness.rundir.errors import ReportWriteError
from harness.rundir.layout import JUNIT, REPORT_HTML, SUMMARY_JSON, SUMMARY_MD
from harness.schema.summary import Summary

Renderer = Callable[[Summary, Path], str]

# JSON stays valid and parses to the same values with these escaped, and the file is then safe to inline in HTML
# or to serve with the wrong content type: no "<script>" from a model name can appear in it.
_HTML_SAFE_JSON = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def html_safe_json(text: str) -> str:
    """JSON text with ``<``, ``>`` and ``&`` as ``\\u`` escapes (still valid JSON with the same values)."""
    return text.translate(_HTML_SAFE_JSON)


def summary_json_text(summary: Summary) -> str:
    """The canonical ``summary.json`` text: ``model_dump_json(indent=2)`` with ``<``, ``>``, ``&`` escaped."""
    return html_safe_json(summary.model_dump_json(indent=2)) + "\n"


def _html(summary: Summary, run_dir: Path) -> str:
    from harness.report.html import render_html  # imports matplotlib: only when a page is rendered

    return render_html(summary, run_dir)


WRITERS: dict[str, tuple[str, Renderer]] = {
    "json": (SUMMARY_JSON, lambda summary, _run_dir: summary_json_text(summary)),
    "md": (SUMMARY_MD, lambda summary, _run_dir: render_markdown(summary)),
    "junit": (JUNIT, lambda summary, _run_dir: render_junit(summary)),
    "html": (REPORT_HTML, _html),
}


def register_writer(name: str, filename: str, renderer: Renderer) -> None:
    """Add (or replace) a writer; it runs after the built-in ones, before ``html``."""
    html = WRITERS.pop("html")
    WRITERS[name] = (filename, renderer)
    WRITERS["html"] = html


def write_atomic(path: Path, text: str) -> Path:
    """Write one report file atomically (:func:`harness.core.atomic.write_text_atomic`: an ``OSError`` names
    ``path``)."""
    return write_text_atomic(path, text)


def write_reports(summary: Summary, run_dir: Path, only: Iterable[str] | None = None) -> dict[str, Path]:
    """Render every registered writer (or those named in ``only``) into ``run_dir``; returns name -> path."""
    names = list(WRITERS) if only is None else [n for n in WRITERS if n in set(only)]
    unknown = sorted(set(only or ()) - set(WRITERS))
    if unknown:
        raise ValueError(f"unknown report writer(s) {', '.join(unknown)}; known: {', '.join(WRITERS)}")
    run_dir.mkdir(parents=True, exist_ok=True)
    return write_files({name: (run_dir / WRITERS[name][0], partial(WRITERS[name][1], summary, run_dir))
                        for name in names})


def write_files(files: dict[str, tuple[Path, Callable[[], str]]]) -> dict[str, Path]:
    """Render and write each ``name: (path, render)`` in order with :func:`write_atomic` (each text is made right
    before its file is written, so a later one sees the files before it); returns name -> path.

    The first file that cannot be written stops it with a :class:`ReportWriteError` that says which files were
    replaced before it and which (it and those after it) are as they were."""
    written: dict[str, Path] = {}
    paths = [path for path, _render in files.values()]
    for position, (name, (path, render)) in enumerate(files.items()):
        text = render()
        try:
            written[name] = write_atomic(path, text)
        except OSError as exc:
            raise ReportWriteError(exc, path, list(written.values()), paths[position:]) from exc
    return written


def render_run(run_dir: Path, summary: Summary | None = None) -> dict[str, Path]:
    """Rebuild every report in ``run_dir`` from ``summary`` (default: the run's validated summary.json)."""
    check_run_dir(run_dir)
    if summary is None:
        summary = load_summary(run_dir)
    return write_reports(summary, run_dir)
