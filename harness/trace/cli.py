"""``harness analyze-trace``: parse options, run :func:`harness.trace.analysis.analyze`, print or write the result.

Wire it into the main app with ``app.command("analyze-trace")(analyze_trace_command)``; ``trace_app`` is a
one-command Typer app around the same function (handy for tests and for ``python -m harness.trace.cli``).
Exit codes: 0 success, 2 bad input (missing file, unknown format, broken line in stop mode, empty trace, bad
option value) with one message on stderr and no traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from harness.core.exit_codes import ExitCode
from harness.trace.analysis import DEFAULT_SHARES, AnalysisOptions, TraceAnalysis, analyze
from harness.trace.html import write_html
from harness.trace.mooncake import TraceFormatError
from harness.trace.readers import OnBadLine, TraceFormat, load_trace
from harness.trace.tiers import TierMode, TierSpec
from harness.trace.units import (
    MODEL_PROFILES,
    Capacity,
    CapacityError,
    format_bytes,
    kv_bytes_per_token,
    parse_capacities,
    parse_capacity,
)

trace_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


class BadInput(Exception):
    """Raised inside the command for any bad input; turned into one stderr line and exit code 2."""


def _shares(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise BadInput(f"--shares {text!r}: expected comma-separated numbers in (0, 1], e.g. 0.5,0.9") from None
    if not values or any(not 0 < v <= 1 for v in values):
        raise BadInput(f"--shares {text!r}: every share must be in (0, 1]")
    return values


def _tiers(gpu: str | None, cpu: str | None, disk: str | None, mode: TierMode) -> TierSpec | None:
    if gpu is None:
        if cpu is not None or disk is not None:
            raise BadInput("--cpu-tier / --disk-tier need --gpu-cache (the GPU KV cache size they add to)")
        return None
    cpus: tuple[Capacity, ...] = tuple(parse_capacities(cpu)) if cpu else ()
    return TierSpec(gpu=parse_capacity(gpu), cpu=cpus, disk=parse_capacity(disk) if disk else None, mode=mode)


def _print_human(result: TraceAnalysis, console: Console) -> None:
    doc: dict[str, Any] = result.document
    pct = "{:.2%}".format
    trace = doc["trace"]
    console.print(f"[bold]{escape(trace['path'])}[/] ({trace['format']}, {doc['block_tokens']} tokens/block)")
    console.print(
        f"requests {doc['requests']:,}  blocks {doc['blocks']:,}  unique blocks {doc['unique_blocks']:,}  "
        f"prompt tokens {doc['prompt_tokens']:,}  duration {doc['duration_s']:,.1f} s"
    )
    console.print(
        f"infinite-cache hit ratio {pct(doc['infinite_cache_hit_ratio'])} of blocks; "
        f"{pct(doc['reused_prefix_token_share'])} of prompt tokens are in reused prefixes; "
        f"all achievable hits need {doc['curve']['max_capacity_blocks']:,} blocks"
    )

    def size(blocks: int, nbytes: int | None) -> str:
        return f"{blocks:,} blocks" + (f" ({format_bytes(nbytes)})" if nbytes is not None else "")

    for row in doc["capacities"]:
        console.print(
            f"  at {row['given']}: {size(row['capacity_blocks'], row['capacity_bytes'])} -> hit ratio "
            f"{pct(row['hit_ratio'])} (tokens {pct(row['token_hit_ratio'])}, "
            f"{pct(row['share_of_achievable'])} of achievable)"
        )
    for row in doc["capacity_for_share"]:
        reach = size(row["capacity_blocks"], row["capacity_bytes"])
        console.print(f"  {pct(row['share'])} of achievable hits: {reach}")
    if doc["tiers"] is not None:
        console.print(f"tier split ({doc['tiers']['mode']}):")
        for row in doc["tiers"]["rows"]:
            split = row["hit_ratio"]
            console.print(
                f"  GPU {row['gpu']['given']} + CPU {row['cpu']['given'] or '-'} + disk {row['disk']['given'] or '-'}: "
                f"GPU {pct(split['gpu'])}, CPU adds {pct(split['cpu'])}, disk adds {pct(split['disk'])}, "
                f"miss {pct(split['miss'])}"
            )
    for warning in doc["warnings"]:
        console.print(Text("warning: ", style="yellow") + Text(warning), highlight=False)


def _run(
    trace: Path,
    fmt: TraceFormat,
    block_tokens: int | None,
    kv_bytes: int | None,
    model_profile: str | None,
    capacities: str | None,
    shares: str | None,
    gpu_cache: str | None,
    cpu_tier: str | None,
    disk_tier: str | None,
    tiering: TierMode,
    on_bad_line: OnBadLine,
    curve_points: int,
) -> TraceAnalysis:
    if not trace.exists():
        raise BadInput(f"{trace}: no such file")
    if trace.is_dir():
        raise BadInput(f"{trace}: is a directory, expected a trace file")
    try:
        options = AnalysisOptions(
            kv_bytes_per_token=kv_bytes_per_token(kv_bytes, model_profile),
            capacities=tuple(parse_capacities(capacities)) if capacities else (),
            shares=_shares(shares) if shares else DEFAULT_SHARES,
            tiers=_tiers(gpu_cache, cpu_tier, disk_tier, tiering),
            curve_points=curve_points,
        )
        loaded = load_trace(trace, fmt, block_tokens, on_bad_line)
        if loaded.trace.n_requests == 0:
            skipped = f" ({len(loaded.bad_lines)} bad line(s) skipped)" if loaded.bad_lines else ""
            raise BadInput(f"{trace}: the trace is empty: no requests{skipped}")
        bad = tuple(b.line_no for b in loaded.bad_lines)
        return analyze(loaded.trace, options, fmt=loaded.format, bad_lines=bad)
    except (TraceFormatError, CapacityError) as exc:
        raise BadInput(str(exc)) from None
    except OSError as exc:
        raise BadInput(f"{trace}: cannot read ({exc.strerror or exc})") from None


TraceArg = Annotated[
    Path,
    typer.Argument(
        metavar="TRACE", help="trace file: Mooncake JSONL, requests.parquet or prompts JSONL", show_default=False
    ),
]
FormatOpt = Annotated[str, typer.Option("--format", help="auto, mooncake, records or prompts")]
BlockTokensOpt = Annotated[
    int | None, typer.Option("--block-tokens", help="tokens per block (mooncake 512, prompts 16, records: the file's)")
]
KvBytesOpt = Annotated[int | None, typer.Option("--kv-bytes-per-token", help="KV-cache bytes per token")]
ProfileOpt = Annotated[
    str | None,
    typer.Option("--model-profile", help="KV bytes per token of: " + ", ".join(sorted(MODEL_PROFILES))),
]
CapacitiesOpt = Annotated[
    str | None,
    typer.Option("--capacities", help="hit ratios at these capacities: blocks (1000,10000) or sizes (8GiB,64GiB)"),
]
SharesOpt = Annotated[
    str | None, typer.Option("--shares", help="capacities reaching these shares of the achievable hits")
]
GpuOpt = Annotated[str | None, typer.Option("--gpu-cache", help="GPU KV cache size for the tier split")]
CpuOpt = Annotated[str | None, typer.Option("--cpu-tier", help="CPU tier size(s), comma-separated")]
DiskOpt = Annotated[str | None, typer.Option("--disk-tier", help="disk tier size")]
TieringOpt = Annotated[str, typer.Option("--tiering", help="inclusive (vLLM offload, LMCache) or exclusive")]
BadLineOpt = Annotated[str, typer.Option("--on-bad-line", help="stop (exit 2) or skip broken lines")]
PointsOpt = Annotated[int, typer.Option("--curve-points", help="curve points in the JSON", min=2, max=10000)]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the analysis as JSON (fields: docs/trace-analysis.md)")]
HtmlOpt = Annotated[Path | None, typer.Option("--html", help="write a self-contained HTML report here")]


@trace_app.command("analyze-trace")
def analyze_trace_command(
    trace: TraceArg,
    fmt: FormatOpt = "auto",
    block_tokens: BlockTokensOpt = None,
    kv_bytes: KvBytesOpt = None,
    model_profile: ProfileOpt = None,
    capacities: CapacitiesOpt = None,
    shares: SharesOpt = None,
    gpu_cache: GpuOpt = None,
    cpu_tier: CpuOpt = None,
    disk_tier: DiskOpt = None,
    tiering: TieringOpt = "inclusive",
    on_bad_line: BadLineOpt = "stop",
    curve_points: PointsOpt = 64,
    json_out: JsonOpt = False,
    html_out: HtmlOpt = None,
) -> None:
    """Analyse a request trace: prefix reuse, reuse distances and the exact LRU hit-ratio curve by capacity."""
    err = Console(stderr=True)
    try:
        if fmt not in ("auto", "mooncake", "records", "prompts"):
            raise BadInput(f"--format {fmt!r}: use auto, mooncake, records or prompts")
        if tiering not in ("inclusive", "exclusive"):
            raise BadInput(f"--tiering {tiering!r}: use inclusive or exclusive")
        if on_bad_line not in ("stop", "skip"):
            raise BadInput(f"--on-bad-line {on_bad_line!r}: use stop or skip")
        result = _run(
            trace,
            cast("TraceFormat", fmt),
            block_tokens,
            kv_bytes,
            model_profile,
            capacities,
            shares,
            gpu_cache,
            cpu_tier,
            disk_tier,
            cast("TierMode", tiering),
            cast("OnBadLine", on_bad_line),
            curve_points,
        )
        if html_out is not None:
            try:
                write_html(result, html_out)
            except OSError as exc:
                raise BadInput(f"--html {html_out}: cannot write ({exc.strerror or exc})") from None
    except BadInput as exc:
        err.print(Text("error: ", style="bold red") + Text(str(exc)), highlight=False, soft_wrap=True)
        raise typer.Exit(ExitCode.BAD_INPUT) from None
    if json_out:
        typer.echo(json.dumps(result.document, indent=2, allow_nan=False))
    else:
        _print_human(result, Console(highlight=False, soft_wrap=True))
        if html_out is not None:
            typer.echo(f"HTML report: {html_out}")


if __name__ == "__main__":  # pragma: no cover
    trace_app()
