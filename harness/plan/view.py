"""Human rendering of a :class:`~harness.plan.build.Plan` with rich (tables, commands, rendered configs, checks).

Every text that comes from the scenario or the host (names, commands, paths, messages) is shown through
:func:`harness.core.term.safe_text`: a terminal escape sequence or carriage return in it is printed as
``\\x1b``/``\\r``, never executed.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape as _markup_escape
from rich.table import Table

from harness.core.term import safe_text
from harness.plan.build import Plan
from harness.plan.power.view import print_power
from harness.schema.validation import resolved_line

_LEVEL_STYLE = {"ok": "green", "warn": "yellow", "error": "bold red"}


def escape(text: object) -> str:
    """Untrusted text, safe for rich markup and for the terminal."""
    return _markup_escape(safe_text(text))


def duration_line(plan: Plan) -> str:
    """The estimated duration, on the clock it is on: wall minutes, or modelled minutes on the virtual clock (which
    are not wall time)."""
    minutes = plan.estimated_duration_s / 60
    note = f" ({plan.duration_note})" if plan.duration_note else ""
    if plan.clock == "real":
        return f"Estimated duration: {minutes:.1f} min{note}"
    return (f"Estimated duration: {minutes:.1f} modelled min on the virtual clock{note}; not wall time: no server "
            "starts and nothing sleeps, so the run takes what the simulator's engine core needs to compute them, "
            "which grows with the requests served, not with the modelled minutes")


def print_plan(plan: Plan, console: Console) -> None:
    """Print the plan."""
    sim = " [bold magenta](SIMULATED engine)[/]" if plan.simulated else ""
    source = f" ({escape(plan.source_file)})" if plan.source_file else ""
    console.print(f"[bold]Scenario[/] {escape(plan.scenario)}{source} — engine {escape(plan.engine)}, model "
                  f"{escape(plan.model)}{sim}")
    if plan.validation is None and not plan.simulated:
        console.print("[bold yellow]NOT VALIDATED by the engine's own code: `harness plan --validate` runs each arm "
                      "through it (`harness run` does so before any server starts)[/]", soft_wrap=True,
                      highlight=False)
    for item in plan.checks:
        if item.name == "validation-incomplete":
            console.print(f"[bold yellow]{escape(item.message)}[/]", soft_wrap=True, highlight=False)
    external = any(arm.launcher == "external" for arm in plan.arms)
    table = Table(title="Arms (run in order, each on its own existing server, never started here)"
                  if external else "Arms (run in order, each on a fresh server)")
    for col in ("#", "arm", "tier", "CPU tier", "disk tier", "launcher"):
        table.add_column(col)
    for i, arm in enumerate(plan.arms):
        cpu = f"{arm.cpu_tier_bytes / (1 << 30):.2f} GiB" if arm.cpu_tier_bytes else "-"
        table.add_row(str(i), escape(arm.name), escape(arm.tier), cpu,
                      escape(", ".join(arm.disk_tier_dirs) or "-"), escape(arm.launcher))
    console.print(table)
    console.print("[bold]Steps per arm:[/] " + escape(", ".join(plan.steps)))
    for line in plan.search:
        console.print("[bold]Capacity search:[/] " + escape(line), soft_wrap=True, highlight=False)
    if plan.load and plan.load != "1 local process":  # the default layout is not worth a line
        console.print("[bold]Load per step:[/] " + escape(plan.load))
    resolved_by_arm = {r.arm: resolved_line(r) for r in plan.validation or []}
    for arm in plan.arms:
        if arm.launcher == "external" and not arm.error:
            console.print(f"\n[bold]{escape(arm.name)}[/] server: {escape(arm.server_url or '?')} (existing; not "
                          "started here: its live configuration is compared with the arm before its first step)",
                          soft_wrap=True, highlight=False)
            continue
        console.print(f"\n[bold]{escape(arm.name)}[/] command:")
        if arm.error:
            console.print(f"  [red]cannot build: {escape(arm.error)}[/]")
            continue
        console.print("  " + escape(arm.command), soft_wrap=True, highlight=False)
        if arm.image:
            console.print(f"  image: {escape(arm.image)}")
        if arm.entrypoint_note:
            console.print(f"  entrypoint: {escape(arm.entrypoint_note)}", soft_wrap=True, highlight=False)
        if arm.container:
            console.print(f"  container: {escape(' '.join(arm.container))}", highlight=False)
        if arm.shm:
            console.print(f"  /dev/shm: {escape(arm.shm)}", soft_wrap=True, highlight=False)
        for volume in arm.volumes:
            console.print(f"  volume: {escape(volume)}", highlight=False)
        if arm.env_keys:
            console.print(f"  env (values not shown): {escape(', '.join(arm.env_keys))}", soft_wrap=True,
                          highlight=False)
        resolved = resolved_by_arm.get(arm.name)
        if resolved is not None:
            console.print(f"  engine resolved: {escape(resolved)}", soft_wrap=True, highlight=False)
        for name, content in arm.config_files.items():
            console.print(f"  [bold]{escape(name)}[/]:")
            for line in content.splitlines():
                console.print("    " + escape(line), highlight=False)
    print_power(plan.power, console)
    console.print("\n[bold]Checks[/]")
    for item in plan.checks:
        style = _LEVEL_STYLE[item.level]
        arm_tag = " " + escape(f"[{item.arm}]") if item.arm else ""
        console.print(f"  [{style}]{item.level:5}[/] {escape(item.name)}{arm_tag}: {escape(item.message)}",
                      soft_wrap=True, highlight=False)
    console.print("\n" + escape(duration_line(plan)), soft_wrap=True, highlight=False)
    where = f" in {escape(plan.source_file)}" if plan.source_file else ""
    errors = sum(1 for item in plan.checks if item.level == "error")
    console.print("[green]plan ok[/]" if plan.ok else
                  f"[bold red]plan has {errors} error(s){where}: fix them before `harness run`[/]", highlight=False)
