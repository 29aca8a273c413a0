"""Templates ship inside the package (so reports render outside the repo) and fixtures match the schema."""

from __future__ import annotations

import fnmatch
import subprocess
import sys
import tomllib
from importlib.resources import files
from pathlib import Path

import pytest

from harness.report.load import load_summary
from harness.report.templating import html_env, md_env
from harness.report.writers import summary_json_text
from tests.support.sample import hostile_summary, sample_summary

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures" / "runs"
TEMPLATES = ("report.html.j2", "summary.md.j2", "index.html.j2", "report.css")


def test_templates_live_in_the_package() -> None:
    folder = files("harness") / "templates"
    for name in TEMPLATES:
        assert (folder / name).is_file(), name
    assert set(html_env().list_templates()) >= set(TEMPLATES)
    assert md_env().get_template("summary.md.j2") is not None


def test_package_data_globs_cover_every_template() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["harness"]
    for path in (REPO / "harness" / "templates").iterdir():
        rel = f"templates/{path.name}"
        assert any(fnmatch.fnmatch(rel, p) for p in patterns), f"{rel} is not installed by package-data {patterns}"


def test_renders_from_another_working_directory(tmp_path: Path) -> None:
    # the installed package alone, outside the repository: the summary comes in as a file, not from tests/support
    (tmp_path / "summary.json").write_text(summary_json_text(sample_summary()), encoding="utf-8")
    code = ("from pathlib import Path; from harness.report.load import load_summary_file; "
            "from harness.report.writers import write_reports; "
            "print(sorted(write_reports(load_summary_file(Path('summary.json')), Path('out'), "
            "only=['md', 'junit'])))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "summary.md").read_text().startswith("**SIMULATED · GO: ship cpu")


def test_top_level_templates_readme_points_to_the_package() -> None:
    text = (REPO / "templates" / "README.md").read_text()
    assert "harness/templates" in text


@pytest.mark.parametrize("name", ["demo-sim", "nogo-vllm", "failed-baseline"])
def test_fixture_summaries_validate_and_are_canonical(name: str) -> None:
    path = FIXTURES / name / "summary.json"
    summary = load_summary(path.parent)
    assert path.read_text() == summary_json_text(summary), "re-run tests/fixtures/runs/generate.py"


def test_demo_fixture_is_the_sample() -> None:
    assert load_summary(FIXTURES / "demo-sim") == sample_summary()


def test_sample_is_deterministic_and_realistic() -> None:
    a, b = sample_summary(), sample_summary()
    assert a == b
    assert [arm.name for arm in a.arms] == ["gpu-only", "cpu", "tiered"]
    assert all(len(arm.steps) == 3 and arm.windows and arm.rules for arm in a.arms)
    assert any(w.breached for arm in a.arms for w in arm.windows)
    assert a.drills and a.fit_screen and a.checks and a.simulated
    assert hostile_summary().model == "<script>alert(1)</script>"
