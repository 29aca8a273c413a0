"""Links to raw files stay relative and inside the run directory."""

from __future__ import annotations

from pathlib import Path

from harness.report.links import raw_links, safe_href
from tests.support.sample import sample_summary, write_sample_run


def test_safe_href_accepts_run_relative_paths() -> None:
    assert safe_href("manifest.json") == "manifest.json"
    assert safe_href("logs/cpu.log") == "logs/cpu.log"
    assert safe_href("metrics/") == "metrics/"
    assert safe_href("./x") == "./x"
    assert safe_href("logs/a b#c?.log") == "logs/a%20b%23c%3F.log"


def test_safe_href_neutralises_schemes_and_escapes() -> None:
    assert safe_href("javascript:alert(1)") == "javascript%3Aalert%281%29"
    assert safe_href('x"><script>') == "x%22%3E%3Cscript%3E"
    for bad in ("", "/etc/passwd", "//evil.example/x", "../secrets", "a/../../b", "a\\b", "logs/\x00x"):
        assert safe_href(bad) is None, bad


def test_raw_links_mark_what_exists(tmp_path: Path) -> None:
    run = write_sample_run(tmp_path / "run")
    links = {link.path: link for link in raw_links(sample_summary(), run)}
    assert links["manifest.json"].exists
    assert links["summary.json"].exists
    assert not links["requests.parquet"].exists  # listed, marked absent
    assert links["logs/cpu.log"].exists
    assert "compose/cpu.yaml" not in links  # per-arm files are listed only when present
    assert all(not link.href.startswith(("/", "http")) for link in links.values())


def test_raw_links_without_run_dir_list_nothing_as_present() -> None:
    assert not any(link.exists for link in raw_links(sample_summary(), None))
