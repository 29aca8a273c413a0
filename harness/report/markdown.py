"""``summary.md``: the verdict, the arms table and what did not pass, sized for a CI step summary or a PR comment."""

from __future__ import annotations

from harness.report.fmt import verdict_title
from harness.report.headline import headline
from harness.report.templating import md_env
from harness.schema.summary import Summary

# GitHub caps a pull-request comment at 65,536 characters (a step summary at 1 MiB): stay well under the smaller.
MAX_MD_CHARS = 60_000


def render_markdown(summary: Summary, max_chars: int = MAX_MD_CHARS) -> str:
    """The summary as Markdown; the first line is the headline (:mod:`harness.report.headline`), marked
    PREDICTED / SIMULATED when it was."""
    template = md_env().get_template("summary.md.j2")
    title = verdict_title(summary)  # escaped by the environment's finalize hook like every other value
    head = headline(summary)
    text = template.render(s=summary, verdict_title=title, headline=head, compact=False)
    if len(text) > max_chars:
        text = template.render(s=summary, verdict_title=title, headline=head, compact=True)
    if len(text) > max_chars:
        cut = text[: max_chars - 80].rsplit("\n", 1)[0]
        text = cut + "\n\n(truncated to fit a CI summary; see report.html)\n"
    return text
