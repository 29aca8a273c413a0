"""The PREDICTED marking shared by the reports (``harness predict``): the label, the junit properties and the text
of the junit ``run.prediction`` case (the HTML and Markdown headers are templates: ``prediction.html.j2``,
``summary_prediction.md.j2``)."""

from __future__ import annotations

from harness.schema.summary import Summary


def label(summary: Summary) -> str:
    """``[PREDICTED] [SIMULATED] ``, ``[SIMULATED] `` or nothing: what a report's title starts with."""
    return ("[PREDICTED] " if summary.prediction is not None else "") + ("[SIMULATED] " if summary.simulated else "")


def properties(summary: Summary) -> dict[str, str]:
    """The run suite's properties of a prediction (none for a measured run)."""
    p = summary.prediction
    if p is None:
        return {}
    return {"predicted": "true", "profile": p.profile.name, "profile_model": p.profile.model,
            "profile_gpu": p.profile.gpu, "clock": p.clock}


def case_text(summary: Summary) -> str:
    """The prediction in plain text: the profile, its sources, the fidelity table, the mapping, the warnings."""
    p = summary.prediction
    if p is None:
        return ""
    blocks = f", {p.profile.gpu_kv_blocks} GPU KV blocks of {p.profile.block_size}" if p.profile.gpu_kv_blocks else ""
    lines = [f"PREDICTED (SIMULATED) on profile {p.profile.name}: {p.profile.model} on {p.profile.gpu}{blocks}; "
             f"{p.clock} clock; scenario {p.scenario} for {p.engine} with {p.model}. A prediction, not a measurement.",
             *(f"warning: {w}" for w in p.warnings), "sources:"]
    for src in p.profile.sources:
        lines.append(f"  [{src.part}] " + src.text.replace("\n", "\n    "))
    if not p.profile.sources:
        lines.append("  none (every figure of this profile is unsourced)")
    lines.append("fidelity:")
    lines += [f"  {row.part}: {row.status_text} ({row.reference}; {row.result})" for row in p.fidelity]
    lines.append("mapping:")
    lines += [f"  {m}" for m in p.mapping]
    return "\n".join(lines)
