"""``python -m tools.decision_bench.calibrate`` (``make decision-bench``): the statistics' calibration, measured
on many simulated rollouts on the virtual clock.

Per coverage case (the inert tier, ``aa``, and the real CPU-tier benefit, ``benefit-fixed``; per-launch drift off
so every launch has the same truth, per-engine-step jitter on, fixed-horizon steps) and per step and measure (p50
and p95 TTFT, output tokens/s: the tier arm over the baseline, read as the decision's improvement, > 1 better):

* the coverage of the nominal 95% two-sided interval, computed from each rollout's run directory with the
  decision's own functions (:mod:`.samples`, :func:`harness.decision.evidence.improvement`), of the truth: the
  pooled ratio over ``--truth-seeds`` truth rollouts of the same design (``--truth-factor`` 1; seeds disjoint from
  the coverage rollouts'), with its own bootstrap standard error (:mod:`.truth`, cached under ``--out``); the A/A
  case also against 1 exactly;
* the bias of the ratio estimate (mean estimate / truth - 1);

and with the realistic noise (per-launch drift on, the cases' sequential steps): the A/A false go and false no-go
rates and the benefit's power (go rate), each with its exact Clopper-Pearson interval. Writes
``decision-bench.md`` and ``calibration.json`` under ``--out``; every rollout's result is appended to
``results.jsonl`` as it completes. Exit 2: bad arguments.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.exit_codes import ExitCode
from harness.core.gc_policy import tune_gc
from tools.decision_bench.calibration import bias, binomial, coverage
from tools.decision_bench.cases import scenario
from tools.decision_bench.parallel import Job, run_jobs
from tools.decision_bench.truth import (
    MEASURES,
    Truth,
    cache_path,
    design_key,
    load_truth,
    pool_truth,
    save_truth,
    truth_se,
)

COVERAGE_CASES = {"aa": "aa", "benefit": "benefit-fixed"}  # table name -> the case's physics (fixed horizon)
DECISION_CASES = ("aa", "benefit")
STEP_LABEL = {"aa": ["c24"], "benefit": ["c12", "c32"]}


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tools.decision_bench.calibrate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("results/decision-bench"))
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="rollouts at once (default: the cores)")
    p.add_argument("--aa-runs", type=int, default=400, help="A/A rollouts with drift on (false go / no-go)")
    p.add_argument("--benefit-runs", type=int, default=60, help="benefit rollouts with drift on (power)")
    p.add_argument("--coverage-runs", type=int, default=100, help="rollouts per coverage case (drift off)")
    p.add_argument("--step-s", type=float, default=10.0, help="modelled seconds per step (default 10)")
    p.add_argument("--decision-step-s", type=float, default=None, help="modelled seconds per step of the decision "
                   "rollouts (default: --step-s; the old real-time bench's 10 s at time scale 0.3 held 33 modelled s)")
    p.add_argument("--truth-factor", type=float, default=1.0, help="truth rollouts' steps are this many times "
                   "longer (default 1: the estimand is the ratio for the design the rollouts ran; > 1 estimates "
                   "another quantity, kept to show the difference)")
    p.add_argument("--truth-seeds", type=int, default=40, help="truth rollouts pooled per case (default 40)")
    p.add_argument("--seed", type=int, default=1000, help="first seed")
    p.add_argument("--max-minutes", type=float, default=15.0, help="start no rollout after this many minutes")
    p.add_argument("--rollout-timeout-s", type=float, default=900.0, help="one rollout's limit (s)")
    p.add_argument("--keep-runs", action="store_true", help="keep every rollout's run directory under --out/runs")
    p.add_argument("--real-time", action="store_true", help="the old path: simulator servers in scaled real time")
    p.add_argument("--table-only", action="store_true", help="run nothing: tabulate --out's results.jsonl against "
                   "its cached truths")
    p.add_argument("--only", nargs="+", choices=["truth", "coverage", "decision"], default=None,
                   help="run only these kinds of rollout")
    args = p.parse_args(argv)
    if not 1 <= args.jobs <= 256:
        p.error("--jobs must be 1..256")
    if min(args.aa_runs, args.benefit_runs, args.coverage_runs) < 0 or args.truth_seeds < 1:
        p.error("run counts must be >= 0 and --truth-seeds >= 1")
    if args.decision_step_s is None:
        args.decision_step_s = args.step_s
    if not args.step_s > 0 or not args.decision_step_s > 0 or not args.truth_factor >= 1 or not args.max_minutes > 0:
        p.error("--step-s, --decision-step-s and --max-minutes must be > 0 and --truth-factor >= 1")
    return args


def _interleave(groups: list[list[Job]]) -> list[Job]:
    """Round-robin over the groups, so a time limit cuts every group about equally."""
    out: list[Job] = []
    for i in range(max((len(g) for g in groups), default=0)):
        out += [g[i] for g in groups if i < len(g)]
    return out


def plan(args: argparse.Namespace, cached: set[str]) -> list[Job]:
    """The rollouts: missing truths first (the longest), then coverage and decision rollouts interleaved."""
    common = {"out": str(args.out), "keep": args.keep_runs, "real_time": args.real_time,
              "timeout_s": args.rollout_timeout_s}
    kinds = set(args.only or ["truth", "coverage", "decision"])
    truth = [Job("truth", case, 90_000 + k, args.step_s * args.truth_factor, 0.0, False, **common)
             for name, case in COVERAGE_CASES.items() if name not in cached and "truth" in kinds
             for k in range(args.truth_seeds)]
    groups = []
    if "coverage" in kinds:
        groups += [[Job("coverage", case, 20_000 + k, args.step_s, 0.0, False, **common)
                    for k in range(args.coverage_runs)] for case in COVERAGE_CASES.values()]
    if "decision" in kinds:
        groups.append([Job("decision", "aa", args.seed + k, args.decision_step_s, 0.05, None,
                           **common)
                       for k in range(args.aa_runs)])
        groups.append([Job("decision", "benefit", args.seed + k, args.decision_step_s, 0.05, None,
                           **common)
                       for k in range(args.benefit_runs)])
    return truth + _interleave(groups)


def _ok(results: list[dict[str, Any]], kind: str, case: str) -> list[dict[str, Any]]:
    return [r for r in results if r["job"]["kind"] == kind and r["job"]["case"] == case and r["status"] == "ok"]


def _lost(results: list[dict[str, Any]], kind: str, case: str) -> int:
    return sum(1 for r in results if r["job"]["kind"] == kind and r["job"]["case"] == case and r["status"] != "ok")


def _seconds(rows: list[dict[str, Any]]) -> float | None:
    return float(np.mean([r["seconds"] for r in rows])) if rows else None


def truth_path(args: argparse.Namespace, case: str) -> Path:
    """Where ``case``'s truth for these arguments is cached (keyed by the truth rollouts' scenario, seed 0)."""
    body = scenario(case, 0, "kv-tier", args.step_s * args.truth_factor, real_time=args.real_time, run_drift=0.0,
                    sequential=False)
    return cache_path(args.out, case, args.step_s, args.truth_factor, args.truth_seeds, design_key(body))


def truths(args: argparse.Namespace, results: list[dict[str, Any]]) -> dict[str, Truth]:
    """Each coverage case's truth: cached, else pooled from this run's truth rollouts (and cached)."""
    out: dict[str, Truth] = {}
    for name, case in COVERAGE_CASES.items():
        path = truth_path(args, case)
        cached = load_truth(path)
        if cached is not None:
            out[name] = cached
            continue
        rows = _ok(results, "truth", case)
        if len(rows) < args.truth_seeds:
            continue  # not every truth rollout ran: no truth (never one from fewer seeds than asked)
        rows = rows[:args.truth_seeds]
        parts = [{int(k): tuple(v) for k, v in r["parts"].items()} for r in rows]
        values = pool_truth(parts)
        truth = Truth(values, truth_se(parts, values))
        out[name] = truth
        save_truth(path, truth, {"case": case, "step_s": args.step_s * args.truth_factor,
                                 "seeds": [r["job"]["seed"] for r in rows], "run_drift": 0.0,
                                 "seconds": [r["seconds"] for r in rows],
                                 "samples": {str(k): [len(p[k][0]) for p in parts if k in p] for k in values}})
    return out


def coverage_rows(results: list[dict[str, Any]], truth: dict[str, Truth]) -> list[dict[str, Any]]:
    """One row per coverage case, step and measure (and the A/A case against 1 too)."""
    rows: list[dict[str, Any]] = []
    for name, case in COVERAGE_CASES.items():
        done = _ok(results, "coverage", case)
        steps = sorted({int(s) for r in done for s in r["estimates"]})
        for step in steps:
            for measure in MEASURES:
                cis = [r["estimates"][str(step)][measure] if str(step) in r["estimates"] else
                       r["estimates"][step][measure] for r in done
                       if str(step) in r["estimates"] or step in r["estimates"]]
                targets: list[tuple[str, float, float | None]] = []
                case_truth = truth.get(name)
                t, se = case_truth.of(step, measure) if case_truth is not None else (None, None)
                if t is not None:
                    targets.append(("truth rollouts", t, se))
                if name == "aa":
                    targets.append(("exactly 1", 1.0, 0.0))
                for what, value, value_se in targets:
                    cov = coverage(cis, value)
                    b = bias([c["ratio"] for c in cis], value)
                    rows.append({"case": name, "physics": case, "step": step,
                                 "label": STEP_LABEL[name][step] if step < len(STEP_LABEL[name]) else str(step),
                                 "measure": measure, "truth_from": what, "truth": value, "truth_se": value_se,
                                 "coverage": cov.rate.as_dict(), "unresolved": cov.unresolved,
                                 "bias": {"bias": b.bias, "lo": b.lo, "hi": b.hi, "n": b.n},
                                 "coverage_text": cov.rate.text(), "bias_text": b.text()})
    return rows


def decision_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The verdicts' rates with the realistic noise."""
    rows = []
    for case in DECISION_CASES:
        done = _ok(results, "decision", case)
        verdicts: dict[str, int] = {}
        for r in done:
            verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
        go = binomial(sum(1 for r in done if r["verdict"] == "go"), len(done))
        nogo = binomial(sum(1 for r in done if r["verdict"] == "no-go"), len(done))
        stat_go = binomial(sum(1 for r in done if r.get("stat_go")), len(done))
        harm = binomial(sum(1 for r in done if r.get("harm")), len(done))
        rows.append({"case": case, "n": len(done), "lost": _lost(results, "decision", case),
                     "stat_go": stat_go.as_dict(), "harm": harm.as_dict(), "stat_go_text": stat_go.text(),
                     "harm_text": harm.text(),
                     "verdicts": dict(sorted(verdicts.items())), "go": go.as_dict(), "no_go": nogo.as_dict(),
                     "go_text": go.text(), "no_go_text": nogo.text(), "seconds_per_rollout": _seconds(done)})
    return rows


def _f(v: float | None, digits: int = 1) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def markdown(args: argparse.Namespace, cov: list[dict[str, Any]], dec: list[dict[str, Any]],
             results: list[dict[str, Any]], wall_s: float) -> str:
    lines = [f"Decision benchmark calibration ({'real time' if args.real_time else 'virtual clock'}; steps "
             f"{args.step_s:g} s; {args.jobs} jobs; {len(results)} rollouts in {_f(wall_s, 0)} s wall).", "",
             f"Coverage of the nominal 95% two-sided interval (per-launch drift 0, step jitter 0.1, fixed horizon; "
             f"truth: {args.truth_seeds} rollouts of the same design pooled" +
             (f", steps {args.truth_factor:g}x longer" if args.truth_factor != 1 else "") +
             ", with its bootstrap standard error over the truth rollouts). Ratios read as "
             "improvements (> 1: the tier arm better); coverage k/n with its exact 95% interval; bias: mean "
             "estimate / truth - 1 with its 95% interval.", "",
             "| case | step | measure | truth ± se (from) | coverage | unresolved | bias |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in cov:
        se = f" ± {r['truth_se']:.4f}" if r.get("truth_se") else ""
        lines.append(f"| {r['case']} | {r['label']} | {r['measure']} | {r['truth']:.4f}{se} ({r['truth_from']}) | "
                     f"{r['coverage_text']} | {r['unresolved']} | {r['bias_text']} |")
    lines += ["", f"Verdicts with the realistic noise (per-launch drift 0.05, step jitter 0.1, the cases' sequential "
              f"steps; {args.decision_step_s:g} s steps):", "",
              "| case | rollouts | lost | verdicts | go | no-go | statistics alone: go | regression breached | "
              "s / rollout |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in dec:
        verdicts = ", ".join(f"{k} {v}" for k, v in r["verdicts"].items()) or "none"
        lines.append(f"| {r['case']} | {r['n']} | {r['lost']} | {verdicts} | {r['go_text']} | {r['no_go_text']} | "
                     f"{r['stat_go_text']} | {r['harm_text']} | {_f(r['seconds_per_rollout'])} |")
    lines += ["", "aa: go is a false go, no-go a false no-go (harm claimed for an inert tier); benefit: go is the "
              "power. Statistics alone: every comparison rule (regression, earns-its-keep, budgets, errors) passed, "
              "whatever the cause and fit rules say (an inert tier serves no hits, so its verdict is never go).", "",
              "Seconds per rollout (mean wall s in one worker, all kinds): " + ", ".join(
                  f"{kind} {case} {_f(_seconds(_ok(results, kind, case)))} (n={len(_ok(results, kind, case))})"
                  for kind, case in sorted({(r['job']['kind'], r['job']['case']) for r in results}))]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    tune_gc()
    args = _args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    cached = {name for name, case in COVERAGE_CASES.items()
              if truth_path(args, case).exists()}
    jobs = plan(args, cached)
    log = args.out / "results.jsonl"
    started = time.monotonic()
    if args.table_only:
        return _tabulate(args, _read_results(log), jobs=0, wall=math.nan)

    def record(result: dict[str, Any]) -> None:
        with log.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({k: v for k, v in result.items() if k != "parts"}) + "\n")  # samples: too big
        j = result["job"]
        print(f"[{time.monotonic() - started:6.0f} s] {j['kind']} {j['case']} seed {j['seed']}: {result['status']} "
              f"{result.get('verdict') or result.get('message', '')} ({result['seconds']:.1f} s)", flush=True)

    print(f"{len(jobs)} rollouts planned over {args.jobs} jobs, at most {args.max_minutes:g} min", flush=True)
    results = list(run_jobs(jobs, args.jobs, args.max_minutes * 60.0, record))
    return _tabulate(args, results, len(jobs), time.monotonic() - started)


def _read_results(log: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        print(f"error: {log}: no results to tabulate ({exc})", file=sys.stderr)
        raise SystemExit(ExitCode.BAD_INPUT) from exc


def _tabulate(args: argparse.Namespace, results: list[dict[str, Any]], jobs: int, wall: float) -> int:
    truth = truths(args, results)
    cov = coverage_rows(results, truth)
    dec = decision_rows(results)
    text = markdown(args, cov, dec, results, wall)
    print(text)
    (args.out / "decision-bench.md").write_text(text, encoding="utf-8")
    body = {"step_s": args.step_s, "jobs": args.jobs, "wall_s": round(wall, 1), "rollouts": len(results),
            "planned": jobs, "virtual": not args.real_time, "truth_factor": args.truth_factor,
            "truth_seeds": args.truth_seeds,
            "truth": {k: {str(s): v for s, v in t.values.items()} for k, t in truth.items()},
            "truth_se": {k: {str(s): {m: (x if math.isfinite(x) else None) for m, x in v.items()}
                             for s, v in t.se.items()} for k, t in truth.items()},
            "coverage": cov, "decisions": dec}
    (args.out / "calibration.json").write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
