"""A realistic, deterministic sample :class:`~harness.schema.summary.Summary` for tests, fixtures and the render
benchmark.

Three arms (``gpu-only`` baseline, ``cpu`` go, ``tiered`` hold) with three rising steps each (two of cpu's ended early,
sequentially), percentiles with intervals (the c4 p99s and every window's p99 too small to resolve), windows with
breaches and unresolved ones, rules with evidence, a noise floor, hit quality by tier, TTFT by hit class, two drills,
the fit screen, pre-flight checks, host and versions (statistics in :mod:`tests.support.sample_stats`).
Nothing here reads the clock or the network: the same arguments give the same summary.
"""

from __future__ import annotations

import json
import random
import re
import shlex
from pathlib import Path
from typing import Literal

from harness.report.writers import summary_json_text
from harness.rundir.layout import COMPOSE_DIR, LOGS_DIR, MANIFEST, METRICS_DIR, REQUESTS, SCENARIO, RunDir
from harness.schema.intervals import Percentiles
from harness.schema.steady import SteadyState
from harness.schema.summary import (
    ArmSummary,
    CheckItem,
    ClientHealth,
    Decision,
    DrillPhase,
    DrillResult,
    FitItem,
    HitClassLatency,
    HitTokens,
    LaunchRecord,
    ServerStep,
    StepSummary,
    Summary,
)
from harness.schema.windows import WindowPoint
from tests.support import sample_stats as stats

DEFAULT_MODEL = "meta-llama/Llama-3.1-8B-Instruct"
STEADY_RULE = "MSER-5 on TTFT in send order"  # as harness.analysis.steady.RULE_TEXT words it (not imported: pandas)
CONCURRENCY = (4, 16, 32)
STEP_S = 60.0
WINDOW_S = 10.0
TTFT_BUDGET_MS = 2000.0
ITL_BUDGET_MS = 100.0
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# Per arm: TTFT p99 at each step (ms), ITL p99 (ms), output tok/s, hit split (gpu, cpu, disk, miss) shares.
_PROFILE: dict[str, dict[str, tuple[float, ...]]] = {
    "gpu-only": {"ttft": (420.0, 1310.0, 2650.0), "itl": (31.0, 48.0, 77.0), "tps": (410.0, 1320.0, 1900.0),
                 "split": (0.52, 0.0, 0.0, 0.48)},
    "cpu": {"ttft": (390.0, 905.0, 1720.0), "itl": (31.5, 47.0, 72.0), "tps": (415.0, 1450.0, 2310.0),
            "split": (0.50, 0.27, 0.0, 0.23)},
    "tiered": {"ttft": (410.0, 1180.0, 2460.0), "itl": (33.0, 55.0, 104.0), "tps": (405.0, 1380.0, 2050.0),
               "split": (0.49, 0.22, 0.13, 0.16)},
}


def _pct(p99: float, rng: random.Random, count: int) -> Percentiles:
    p50 = p99 * rng.uniform(0.32, 0.42)
    p95 = p99 * rng.uniform(0.72, 0.85)
    return stats.with_intervals(Percentiles(p50=round(p50, 2), p95=round(p95, 2), p99=round(p99, 2),
                                            mean=round(p50 * 1.15, 2), count=count))


def _hits(split: tuple[float, ...], prompt: int, tier: str) -> HitTokens:
    gpu, cpu, disk, _ = (int(prompt * s) for s in split)
    miss = prompt - gpu - cpu - disk
    return HitTokens(gpu=gpu, cpu=cpu if tier != "gpu-only" else 0, disk=disk if tier == "tiered" else 0,
                     miss=miss, prompt=prompt, source="server")


def _step(arm: str, tier: str, i: int, rng: random.Random) -> StepSummary:
    prof = _PROFILE[arm]
    conc = CONCURRENCY[i]
    duration = _EARLY.get((arm, i), (STEP_S, None))[0]
    requests = int(conc * duration / (1.0 + 0.15 * i) * 0.9)
    errors = 0 if i < 2 else (3 if arm == "tiered" else 1)
    ttft = _pct(prof["ttft"][i], rng, requests - errors)
    itl = stats.with_intervals(_pct(prof["itl"][i], rng, (requests - errors) * 180), requests - errors)
    e2e = _pct(prof["ttft"][i] + prof["itl"][i] * 190, rng, requests - errors)
    prompt = requests * 3100
    classes = [("mostly-cached", 0.55, 0.45), ("partial", 0.3, 0.8), ("recomputed", 0.15, 1.25)]
    by_class = [HitClassLatency(hit_class=name, requests=int(requests * share),
                                ttft_ms=_pct(prof["ttft"][i] * factor, rng, int(requests * share)))
                for name, share, factor in classes]
    server = ServerStep(
        ttft_ms=_pct(prof["ttft"][i] * 0.93, rng, requests), itl_ms=_pct(prof["itl"][i] * 0.97, rng, requests),
        kv_usage_max=round(min(0.99, 0.3 + 0.25 * i), 3),
        cpu_tier_pinned_max=None if tier == "gpu-only" else round(0.2 + 0.3 * i, 3),
        preemptions=float(2 * i if tier == "gpu-only" else i), running_max=float(conc), waiting_max=float(i * 3),
        offload_store_bytes=None if tier == "gpu-only" else 2.1e9 * (i + 1),
        offload_load_bytes=None if tier == "gpu-only" else 1.4e9 * (i + 1),
        disk_read_bytes=6.0e8 * (i + 1) if tier == "tiered" else None,
        disk_write_bytes=9.0e8 * (i + 1) if tier == "tiered" else None,
        scrapes=30, scrape_errors=0,
        missing=[] if tier == "tiered" else ["vllm:kv_offload_tiering_read_bytes_total"])
    return StepSummary(
        index=i, label=f"c{conc}", concurrency=conc, duration_s=duration, requests=requests, errors=errors,
        planned_duration_s=STEP_S, ended_early=duration < STEP_S, stop_reason=_EARLY.get((arm, i), (STEP_S, None))[1],
        error_rate=round(errors / requests, 5), errors_by_kind={"timeout": errors} if errors else {},
        ttft_ms=ttft, itl_ms=itl, e2e_ms=e2e, output_tokens_per_s=prof["tps"][i],
        request_rate=round(requests / duration, 3),
        goodput=round(0.99 - 0.04 * i - (0.05 if arm == "tiered" else 0), 3),
        hit_tokens=_hits(prof["split"], prompt, tier), client_cached_tokens=int(prompt * (1 - prof["split"][3])),
        ttft_by_hit_class=by_class, server=server,
        client=ClientHealth(cpu_percent=round(12.0 + 9 * i, 1), send_lag_ms_p50=0.4, send_lag_ms_p99=2.5 + i),
        steady_state=_steady(requests, errors, conc, duration, prof["tps"][i]))


def _steady(requests: int, errors: int, conc: int, duration: float, tps: float) -> SteadyState:
    """The step's steady state: the first ~2 requests per user (one batch of MSER-5's 5 per 2.5 users) cut."""
    removed = 5 * max(1, round(2 * conc / 5))
    seconds = round(duration * removed / requests, 3)
    return SteadyState(rule=STEADY_RULE, requests_removed=removed, seconds_removed=seconds, start_s=seconds,
                       end_s=duration, requests=requests - removed, samples=requests - removed - errors,
                       completed=requests - removed - errors, output_tokens_per_s=round(tps * 1.02, 1),
                       goodput=1.0 if not errors else round(1 - errors / (requests - removed), 4))


def _windows(arm: str, rng: random.Random) -> list[WindowPoint]:
    prof = _PROFILE[arm]
    points: list[WindowPoint] = []
    step_start = 0.0
    for i in range(len(CONCURRENCY)):
        duration = _EARLY.get((arm, i), (STEP_S, None))[0]
        for w in range(int(duration / WINDOW_S)):
            start = step_start + w * WINDOW_S
            ttft = prof["ttft"][i] * rng.uniform(0.85, 1.12)
            itl = prof["itl"][i] * rng.uniform(0.9, 1.1)
            n = int(CONCURRENCY[i] * 12)
            ttft_ci, itl_ci = stats.window_ci(round(ttft, 1), n), stats.window_ci(round(itl, 2), n)
            breached: list[str] = []
            unresolved: list[str] = []
            for rule, ci, budget in (("ttft-p99-budget", ttft_ci, TTFT_BUDGET_MS), ("itl-p99-budget", itl_ci,
                                                                                    ITL_BUDGET_MS)):
                outcome = stats.budget_outcome(ci, budget)
                if outcome == "breach":
                    breached.append(rule)
                elif outcome == "unresolved":
                    unresolved.append(rule)
            points.append(WindowPoint(step=i, start_s=start, end_s=start + WINDOW_S, requests=n,
                                      ttft_p99_ms=round(ttft, 1), itl_p99_ms=round(itl, 2),
                                      e2e_p99_ms=round(ttft + itl * 190, 1), ttft_p99_ci=ttft_ci, itl_p99_ci=itl_ci,
                                      e2e_p99_ci=stats.window_ci(round(ttft + itl * 190, 1), n),
                                      breached=breached, unresolved=unresolved))
        step_start += duration
    return points


# Sequential steps that ended early: (arm, step) -> (seconds used, why).
_EARLY: dict[tuple[str, int], tuple[float, str | None]] = {
    ("cpu", 1): (38.0, "decision settled at 38 s: p95 TTFT ratio 0.71x [0.64–0.79] clears 1.05x (confidence "
                       "sequence, alpha 0.05)"),
    ("cpu", 2): (41.0, "decision settled at 41 s: p95 TTFT ratio 0.70x [0.63–0.78] clears 1.05x (confidence "
                       "sequence, alpha 0.05)"),
}


_DECISIONS: dict[str, tuple[Decision, list[str]]] = {
    "gpu-only": ("baseline", ["Baseline: p99 TTFT 2650 ms at c32 breaks the 2000 ms budget; offload is worth trying."]),
    "cpu": ("go", ["p99 TTFT at c32 fell from 2650 ms to 1720 ms (0.65x baseline) with 27% of prompt tokens from "
                   "the CPU tier.", "No budget breached in any window."]),
    "tiered": ("hold", ["Disk promotions served 13% of prompt tokens but p99 TTFT at c32 (2460 ms) is worse than "
                        "the cpu arm (1720 ms).", "storage_pressure drill failed: p99 TTFT 5400 ms > 4000 ms."]),
}
_TIERS: dict[str, Literal["gpu-only", "cpu", "tiered"]] = {"gpu-only": "gpu-only", "cpu": "cpu", "tiered": "tiered"}


def _launch(arm: str, model_name: str) -> LaunchRecord:
    extra = {"gpu-only": [], "cpu": ["--kv-offloading-size", "16"],
             "tiered": ["--kv-transfer-config", '{"kv_connector":"OffloadingConnector","kv_role":"kv_both"}']}[arm]
    cmd = shlex.join(["python", "-m", "harness.sim", "serve", "--model", model_name, "--port", "18000",
                      "--enable-prefix-caching", *extra])
    return LaunchRecord(command=cmd, image=None, image_digest=None, launcher="process",
                        config_files={"sim-profile.yaml": f"model: {model_name}\nkv_blocks: 2048\n"},
                        env_keys=["HF_TOKEN", "SIM_SEED"], compose_file=f"compose/{arm}.yaml")


def sample_summary(model_name: str = DEFAULT_MODEL, *, simulated: bool = True, seed: int = 7) -> Summary:
    """A realistic three-arm summary (verdict ``go``, recommending ``cpu``); deterministic for given arguments."""
    rng = random.Random(seed)
    arms: list[ArmSummary] = []
    for name in ("gpu-only", "cpu", "tiered"):
        decision, reasons = _DECISIONS[name]
        tier = _TIERS[name]
        arms.append(ArmSummary(
            name=name, tier=tier, decision=decision, reasons=reasons,
            cpu_tier_bytes={"gpu-only": 0, "cpu": 16 << 30, "tiered": 16 << 30}[name],
            disk_tier_dirs=["/mnt/nvme/kv-tier"] if name == "tiered" else [],
            launch=_launch(name, model_name), steps=[_step(name, tier, i, rng) for i in range(len(CONCURRENCY))],
            rules=stats.rules(name), windows=_windows(name, rng)))
    drills = [
        DrillResult(kind="cache_loss", arm="tiered", status="pass",
                    message="No errors; TTFT p99 recovered to 1.08x of before within 10 s.",
                    phases=[DrillPhase(phase="before", requests=120, errors=0, ttft_p99_ms=1150.0,
                                       hit_tokens=HitTokens(gpu=180000, cpu=90000, disk=40000, miss=62000)),
                            DrillPhase(phase="during", requests=118, errors=0, ttft_p99_ms=2380.0,
                                       hit_tokens=HitTokens(gpu=60000, cpu=0, disk=0, miss=310000)),
                            DrillPhase(phase="after", requests=121, errors=0, ttft_p99_ms=1240.0,
                                       hit_tokens=HitTokens(gpu=170000, cpu=85000, disk=36000, miss=80000))],
                    details={"recovery_s": 8.5}),
        DrillResult(kind="storage_pressure", arm="tiered", status="fail",
                    message="p99 TTFT 5400 ms during storage pressure > limit 4000 ms.",
                    phases=[DrillPhase(phase="before", requests=119, errors=0, ttft_p99_ms=1180.0),
                            DrillPhase(phase="during", requests=96, errors=2, ttft_p99_ms=5400.0,
                                       hit_tokens=HitTokens(missing=["vllm:prompt_tokens_cached_by_source_total"])),
                            DrillPhase(phase="after", requests=117, errors=0, ttft_p99_ms=1320.0)],
                    details={"fill_gib": 40.0, "read_slowdown": 8}),
    ]
    fit = [
        FitItem(name="gpu-memory-is-the-limit", status="pass",
                evidence="KV usage reached 99% at c32 on gpu-only with 4 preemptions."),
        FitItem(name="prompts-share-prefixes", status="pass",
                evidence="52% of prompt tokens hit the GPU prefix cache."),
        FitItem(name="tail-slo-reachable", status="warn",
                evidence="A disk promotion of a 32k-token prefix takes ~310 ms; the 2000 ms p99 budget leaves room."),
        FitItem(name="host-not-contended", status="pass", evidence="48 GiB host memory free after the 16 GiB tier."),
        FitItem(name="cheaper-options-tried", status="unknown",
                evidence="Scenario does not say whether max-num-batched-tokens was tuned."),
    ]
    checks = [
        CheckItem(name="host-headroom", level="ok", message="16 GiB tier fits: 64 GiB free - 8 GiB reserve."),
        CheckItem(name="disk-room", level="warn", arm="tiered", message="Disk tier has 120 GiB free; 10 GiB reserve."),
        CheckItem(name="image-pinned", level="ok", message="Simulator runs as a local process; no image."),
    ]
    return Summary(
        run_id="20250101-120000-demo-ab12", scenario="demo", scenario_hash="sha256:3f2a9c0d5e7b", engine="sim",
        model=model_name, simulated=simulated, verdict="go", recommended_arm="cpu", exit_code=0,
        verdict_reason="cpu cut p99 TTFT at c32 by 35% with no budget breached; tiered did not earn its keep.",
        started_at="2025-01-01T12:00:00Z", finished_at="2025-01-01T12:11:40Z", caches_carry_over_between_steps=True,
        slo={"ttft_p99_ms": TTFT_BUDGET_MS, "itl_p99_ms": ITL_BUDGET_MS, "e2e_p99_ms": None},
        arms=arms, fit_screen=fit, checks=checks, drills=drills, noise_floor=stats.noise_floor(),
        load_time=stats.load_time([s.planned_duration_s or s.duration_s for a in arms for s in a.steps],
                                  [s.duration_s for a in arms for s in a.steps]),
        statistics=stats.statistics(),
        warnings=["Load generator CPU reached 30% at c32 (not saturated).",
                  "caches carried over between steps (arms start fresh; steps share a server)."],
        missing_metrics=["vllm:kv_offload_tiering_read_bytes_total (arms gpu-only, cpu)"],
        host={"hostname": "bench-01", "cpu_model": "AMD EPYC 9454", "cpus": 96, "mem_total_gib": 768.0,
              "gpu": "simulated", "os": "Debian 12"},
        versions={"harness": "0.1.0", "python": "3.11.7", "engine": f"sim 0.1.0 ({model_name})"},
        files={"manifest": MANIFEST, "scenario": SCENARIO, "requests": REQUESTS, "metrics": f"{METRICS_DIR}/",
               "logs": f"{LOGS_DIR}/", "compose": f"{COMPOSE_DIR}/"},
    )


def write_sample_run(run_dir: Path, summary: Summary | None = None) -> Path:
    """Write a minimal run directory (summary.json plus small raw files) for tests and the benchmark."""
    summary = summary or sample_summary()
    run_dir.mkdir(parents=True, exist_ok=True)
    files = RunDir(run_dir)
    files.summary_json.write_text(summary_json_text(summary), encoding="utf-8")
    files.manifest.write_text(json.dumps({"run_id": summary.run_id, "engine": summary.engine}, indent=2) + "\n",
                              encoding="utf-8")
    files.scenario.write_text(f"name: {summary.scenario}\n", encoding="utf-8")
    for sub in (METRICS_DIR, LOGS_DIR, COMPOSE_DIR):
        (run_dir / sub).mkdir(exist_ok=True)
    for arm in summary.arms:
        if not _SAFE_NAME.match(arm.name):
            continue
        files.log(arm.name).write_text("server started\n", encoding="utf-8")
    return run_dir


XSS = "<script>alert(1)</script>"
XSS_ATTR = '"><img src=x onerror=alert(2)>'


def hostile_summary(payload: str = XSS) -> Summary:
    """The sample with markup, quotes and Markdown/TeX punctuation in every free-text field (escaping tests).

    The model name is ``payload`` itself; arm names, step labels, reasons, rule and drill messages, log lines,
    launch commands, config files, host and version values, warnings and file names carry it too.
    """
    data = sample_summary(model_name=payload).model_dump()
    evil = f"{payload} {XSS_ATTR} $x$ | *y* &amp; `z`"
    data["scenario"] = f"demo {payload}"
    data["run_id"] = f"run-{payload}"
    data["verdict_reason"] = evil
    data["warnings"].append(evil)
    data["missing_metrics"].append(evil)
    data["host"]["hostname"] = evil
    data["versions"]["engine"] = evil
    data["files"]["evil"] = f"javascript:alert(3)//{payload}"
    data["fit_screen"][0]["evidence"] = evil
    data["checks"][0]["message"] = evil
    data["drills"][0]["message"] = evil
    data["drills"][1]["kind"] = evil
    for i, arm in enumerate(data["arms"]):
        arm["name"] = f"{arm['name']}{payload}" if i else arm["name"]
        arm["reasons"].append(evil)
        arm["launch"]["command"] += f" --served-model-name '{payload}'"
        arm["launch"]["config_files"]["evil.yaml"] = evil
        arm["rules"][0]["message"] = evil
        arm["rules"][0]["rule"] = f"rule-{payload}"
        arm["steps"][0]["label"] = f"c4{payload}"
        arm["steps"][0]["ttft_by_hit_class"][0]["hit_class"] = evil
        arm["windows"][0]["breached"] = [evil]
        arm["failure"] = {"phase": "step", "message": evil, "log_tail": [evil, "\x1b[31mred\x1b[0m \x00 nul"]}
    data["arms"][2]["decision"] = "no-go"
    data["recommended_arm"] = data["arms"][1]["name"]
    return Summary.model_validate(data)
