"""The 'is offload the wrong optimisation?' screen, computed from the baseline before any verdict.

Items: GPU memory is the limit (KV usage, preemptions); prefixes come back (reuse in the traffic); promoting a
typical reused prefix over the host link fits the TTFT budget; host memory is not already contended (checks, and
the baseline's host telemetry: memory available, disk-tier device busy time);
prefix caching is on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from harness.config.scenario import Scenario
from harness.decision.rules.host_contention import host_contention
from harness.schema.summary import ArmSummary, CheckItem, FitItem

KV_PRESSURE = 0.8
MIN_REUSE = 0.2


def reuse_share(hash_lists: Iterable[Sequence[int]]) -> tuple[float | None, int]:
    """Share of prompt blocks already seen earlier (an infinite cache's hit share), and the block count."""
    seen: set[int] = set()
    total = reused = 0
    for hashes in hash_lists:
        run = True
        for h in hashes:
            total += 1
            if run and h in seen:
                reused += 1
            else:
                run = False
            seen.add(h)
    return (reused / total if total else None), total


def _gpu_limit(base: ArmSummary) -> FitItem:
    usage = [s.server.kv_usage_max for s in base.steps if s.server.kv_usage_max is not None]
    pre = [s.server.preemptions for s in base.steps if s.server.preemptions is not None]
    if not usage and not pre:
        return FitItem(name="gpu-memory-is-the-limit", status="unknown",
                       evidence="KV usage and preemption series were missing from the baseline's metrics")
    peak = max(usage) if usage else None
    preempt = sum(pre) if pre else None
    text = (f"baseline peak GPU KV usage {peak:.0%}" if peak is not None else "KV usage missing") + \
        (f", {preempt:.0f} preemptions" if preempt is not None else ", preemptions missing")
    limited = (peak is not None and peak >= KV_PRESSURE) or (preempt is not None and preempt > 0)
    if limited:
        return FitItem(name="gpu-memory-is-the-limit", status="pass", evidence=text + ": the GPU KV cache is full "
                       "under this load, so extra capacity can keep prefixes")
    return FitItem(name="gpu-memory-is-the-limit", status="warn", evidence=text + f": the GPU KV cache never "
                   f"reached {KV_PRESSURE:.0%} — an offload tier has little to keep")


def _reuse(share: float | None, blocks: int) -> FitItem:
    if share is None:
        return FitItem(name="prefixes-come-back", status="unknown", evidence="no request records with prompt "
                       "block hashes in the baseline")
    text = f"{share:.0%} of {blocks} prompt blocks in the baseline's traffic repeat an earlier prefix"
    if share < MIN_REUSE:
        return FitItem(name="prefixes-come-back", status="warn", evidence=text + ": prompts are nearly unique, "
                       "so no cache tier can help much")
    return FitItem(name="prefixes-come-back", status="pass", evidence=text)


def _promotion_cost(scenario: Scenario, typical_prefix_tokens: float | None) -> FitItem:
    kv = scenario.checks.kv_bytes_per_token
    budget = scenario.slo.ttft_p99_ms
    if kv is None or typical_prefix_tokens is None or budget is None:
        missing = [n for n, v in (("checks.kv_bytes_per_token", kv), ("slo.ttft_p99_ms", budget),
                                  ("a typical reused prefix", typical_prefix_tokens)) if v is None]
        return FitItem(name="promotion-fits-ttft-budget", status="unknown",
                       evidence=f"cannot estimate: {', '.join(missing)} unknown")
    gbps = scenario.checks.host_to_device_gbps
    ms = typical_prefix_tokens * kv / (gbps * 1e9) * 1e3
    mib = typical_prefix_tokens * kv / 2**20
    text = (f"promoting a typical reused prefix of {typical_prefix_tokens:.0f} tokens ({mib:.0f} MiB of KV) at "
            f"{gbps:g} GB/s takes ~{ms:.1f} ms against a p99 TTFT budget of {budget:.0f} ms")
    if ms > 0.5 * budget:
        return FitItem(name="promotion-fits-ttft-budget", status="warn", evidence=text + ": the transfer path "
                       "alone eats over half the budget")
    return FitItem(name="promotion-fits-ttft-budget", status="pass", evidence=text)


def _host_contention(checks: Sequence[CheckItem], base: ArmSummary | None = None) -> FitItem:
    items = [c for c in checks if c.name == "host-headroom"]
    if not items:
        warn, evidence = False, "no CPU tier needs host memory"
    else:
        worst = max(items, key=lambda c: {"ok": 0, "warn": 1, "error": 2}[c.level])
        warn, evidence = worst.level != "ok", worst.message
    seen = host_contention(base)  # measured during the baseline (host telemetry), where it was sampled
    if seen is not None:
        warn, evidence = warn or seen[0] == "warn", f"{evidence}; {seen[1]}"
    return FitItem(name="host-memory-not-contended", status="warn" if warn else "pass", evidence=evidence)


def fit_screen(scenario: Scenario, base: ArmSummary | None, checks: Sequence[CheckItem],
               reuse: tuple[float | None, int], typical_prefix_tokens: float | None) -> list[FitItem]:
    """All fit items."""
    items: list[FitItem] = []
    if base is not None and base.steps:
        items.append(_gpu_limit(base))
    else:
        items.append(FitItem(name="gpu-memory-is-the-limit", status="unknown", evidence="the baseline has no steps"))
    items.append(_reuse(*reuse))
    items.append(_promotion_cost(scenario, typical_prefix_tokens))
    items.append(_host_contention(checks, base))
    if scenario.engine.enable_prefix_caching:
        items.append(FitItem(name="prefix-caching-tried-first", status="pass",
                             evidence="GPU prefix caching is on in every arm"))
    else:
        items.append(FitItem(name="prefix-caching-tried-first", status="warn", evidence="GPU prefix caching is off: "
                             "turn it on before adding offload tiers"))
    return items
