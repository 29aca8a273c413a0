"""``python -m tools.decision_bench`` (``make decision-bench``): the verdict's error rates, measured.

Runs many short simulated rollouts of the known-answer cases in :mod:`.cases` (noise on, seeds varied) and prints,
per case: how often each verdict came out, the false-go rate (A/A), the power (benefit: go), how often the tail
test flagged the slow-disk regression against how often Mann-Whitney alone would have, and load time used against
the fixed horizon. Every rollout is a real one (``harness run``'s code path, reports off; on the virtual clock unless
``--real-time``); its run directory is kept under ``--out`` so any figure can be traced back to its requests. The
statistics' calibration (coverage, bias, error rates over many parallel rollouts) is :mod:`.calibrate`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from harness.run.options import RunOptions
from tools.decision_bench.cases import CASES, scenario
from tools.decision_bench.time_to_decision import case_figures


@dataclass
class Outcome:
    """What one rollout decided and measured."""

    case: str
    seed: int
    verdict: str
    decision: str
    tail_flag: bool  # the percentile regression rule breached at some step
    mw_flag: bool  # Mann-Whitney alone (one-sided, Bonferroni over steps) would have flagged
    stat_go: bool  # every comparison rule passed (what the verdict would be without the cause/fit rules)
    own_hits: str
    planned_s: float
    used_s: float
    seconds: float
    run_dir: str
    rules: dict[str, str] = field(default_factory=dict)  # rule (@step) -> status
    arm_planned_s: float = 0.0  # the tier arm's own steps (the baseline's are the reference every arm shares)
    arm_used_s: float = 0.0


def _mw_flag(run_dir: Path, arm: str, base: str, alpha: float, steps: int) -> bool:
    from scipy.stats import mannwhitneyu

    from harness.analysis import derive_latencies, load_requests

    df = derive_latencies(load_requests(run_dir))
    df = df[df["ok"] & (df["step"] >= 0)]
    for step in sorted(set(df["step"].tolist())):
        a = df[(df["arm"] == arm) & (df["step"] == step)]["ttft_ms"].dropna().to_numpy()
        b = df[(df["arm"] == base) & (df["step"] == step)]["ttft_ms"].dropna().to_numpy()
        if len(a) >= 20 and len(b) >= 20 and mannwhitneyu(a, b, alternative="greater").pvalue < alpha / steps:
            return True
    return False


def run_case(case: str, seed: int, out: Path, step_s: float, design: dict[str, Any] | None = None,
             real_time: bool = False) -> Outcome:
    """One rollout of one case (``design``: sequential settings overriding the case's; ``real_time``: simulator
    servers in scaled real time instead of the virtual clock)."""
    from harness.run.orchestrator import run_rollout

    work = out / f"{case}-{seed}"
    work.mkdir(parents=True, exist_ok=True)
    path = work / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario(case, seed, str(work / "kv-tier"), step_s, design,
                                                  real_time=real_time), sort_keys=False),
                    encoding="utf-8")
    started = time.monotonic()
    result = run_rollout(path, RunOptions(out_dir=work / "runs", write_reports=False), say=lambda *_: None)
    seconds = time.monotonic() - started
    summary = result.summary
    if summary is None or result.run_dir is None:
        return Outcome(case, seed, f"error: {result.message}", "error", False, False, False, "", 0.0, 0.0,
                       seconds, str(result.run_dir), {})
    arm = summary.arms[1]
    rules: dict[str, str] = {r.rule if r.step is None else f"{r.rule}@{r.step}": str(r.status) for r in arm.rules}
    tail = any(r.kind == "regression" and r.status == "breach" for r in arm.rules)
    comparisons = [r for r in arm.rules if r.kind in ("regression", "earns_keep", "budget", "errors")
                   and r.status != "not-applicable"]
    stat_go = bool(comparisons) and all(r.status == "pass" for r in comparisons)
    hits = next((r.message for r in arm.rules if r.kind == "causal"), "")
    arm_planned = sum(s.planned_duration_s if s.planned_duration_s is not None else s.duration_s for s in arm.steps)
    return Outcome(case, seed, summary.verdict, arm.decision, tail,
                   _mw_flag(result.run_dir, arm.name, summary.arms[0].name, 0.05, len(arm.steps) or 1), stat_go,
                   hits[:120],
                   summary.load_time.planned_s, summary.load_time.used_s, seconds, str(result.run_dir), rules,
                   arm_planned_s=round(arm_planned, 3), arm_used_s=round(sum(s.duration_s for s in arm.steps), 3))


def _rate(flags: list[bool]) -> str:
    if not flags:
        return "n/a"
    k, n = sum(flags), len(flags)
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return f"{k}/{n} = {k / n:.0%} [{ci.low:.0%}, {ci.high:.0%}]"


def judged(o: Outcome) -> bool:
    """The rollout measured the tier: neither the baseline nor the tier arm failed (e.g. a server killed from
    outside); lost runs are counted apart, never as an error or a success of the verdict."""
    return o.verdict != "failed" and o.decision not in ("failed", "skipped", "error") and \
        not o.verdict.startswith("error")


def table(outcomes: list[Outcome]) -> str:
    """The benchmark's figures (rates with exact 95% binomial intervals)."""
    lines = ["| case | truth | runs judged | verdicts | error rate | go | tail test flags | Mann-Whitney alone | "
             "stats-only go | load time used / fixed horizon | wall s / run | runs lost (an arm failed) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, info in CASES.items():
        every = [o for o in outcomes if o.case == name]
        mine = [o for o in every if judged(o)]
        lost = len(every) - len(mine)
        if not mine:
            continue
        counts: dict[str, int] = {}
        for o in mine:
            counts[o.verdict] = counts.get(o.verdict, 0) + 1
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        used = sum(o.used_s for o in mine) / max(1e-9, sum(o.planned_s for o in mine))
        lines.append(f"| {name} | {info.truth} | {len(mine)} | {verdicts} | "
                     f"{_rate([o.verdict in info.bad_verdicts for o in mine])} | "
                     f"{_rate([o.verdict == 'go' for o in mine])} | "
                     f"{_rate([o.tail_flag for o in mine])} | {_rate([o.mw_flag for o in mine])} | "
                     f"{_rate([o.stat_go for o in mine])} | {used:.0%} | "
                     f"{float(np.mean([o.seconds for o in mine])):.0f} | {lost} |")
    seq = [o for o in outcomes if o.case == "benefit" and judged(o)]
    fixed = [o for o in outcomes if o.case == "benefit-fixed" and judged(o)]
    if seq and fixed:
        s_used = float(np.mean([o.used_s for o in seq]))
        f_used = float(np.mean([o.used_s for o in fixed]))
        lines.append("")
        lines.append(f"Sequential steps used {s_used:.1f} s of load per benefit rollout on average against "
                     f"{f_used:.1f} s at the fixed horizon: {s_used / f_used:.0%}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.decision_bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("results/decision-bench"))
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    p.add_argument("--runs", type=int, default=10, help="rollouts per case (default 10; aa gets 4x)")
    p.add_argument("--aa-runs", type=int, default=None, help="A/A rollouts (default 4 x --runs)")
    p.add_argument("--step-s", type=float, default=10.0, help="planned seconds per step (default 10)")
    p.add_argument("--seed", type=int, default=1000, help="first seed")
    p.add_argument("--looks", type=int, default=None, help="sequential looks per step (default: the scenario "
                   "default, 4)")
    p.add_argument("--min-fraction", type=float, default=None, help="the first look's share of a step (default 0.25)")
    p.add_argument("--figures-json", type=Path, default=None, help="also write the time-to-decision figures "
                   "(tools.decision_bench.time_to_decision) to this JSON file")
    p.add_argument("--real-time", action="store_true", help="the old path: simulator servers in scaled real time "
                   "(default: the virtual clock)")
    p.add_argument("--table-from", type=Path, nargs="+", default=None,
                   help="only print the table of earlier runs' outcomes.jsonl files")
    args = p.parse_args(argv)
    if args.looks is not None and not 2 <= args.looks <= 20:
        p.error("--looks must be between 2 and 20")
    if args.min_fraction is not None and not 0 < args.min_fraction < 1:
        p.error("--min-fraction must be between 0 and 1")
    if not 1 <= args.runs <= 1000 or (args.aa_runs is not None and not 1 <= args.aa_runs <= 4000):
        p.error("--runs must be 1..1000 and --aa-runs 1..4000")
    design = {k: v for k, v in (("looks", args.looks), ("min_fraction", args.min_fraction)) if v is not None}
    if args.table_from:
        rows = [Outcome(**json.loads(line)) for path in args.table_from
                for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        print(table(rows))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    outcomes: list[Outcome] = []
    log = args.out / "outcomes.jsonl"
    for case in args.cases:
        n = (args.aa_runs or 4 * args.runs) if case.startswith("aa") else args.runs
        for k in range(n):
            outcome = run_case(case, args.seed + k, args.out, args.step_s, design, args.real_time)
            outcomes.append(outcome)
            with log.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(outcome.__dict__) + "\n")
            print(f"{case} seed {outcome.seed}: {outcome.verdict} ({outcome.decision}); tail flag "
                  f"{outcome.tail_flag}, MW {outcome.mw_flag}; load {outcome.used_s:.0f}/{outcome.planned_s:.0f} s; "
                  f"{outcome.seconds:.0f} s", flush=True)
    text = table(outcomes)
    print(text)
    (args.out / "decision-bench.md").write_text(text + "\n", encoding="utf-8")
    if args.figures_json is not None:
        figures = {"design": design or {"looks": 4, "min_fraction": 0.25}, "step_s": args.step_s,
                   "cases": case_figures(outcomes, judged)}
        args.figures_json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
