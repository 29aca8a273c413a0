"""The 'is offload the wrong optimisation?' screen, computed from the baseline before any verdict.

Items: GPU memory is the limit (KV usage, preemptions); prefixes come back (reuse in the traffic); promoting a
typical reused prefix over the host link fits the TTFT budget; host memory is not already contended (checks, and
the baseline's host telemetry: memory available, disk-tier device busy time);
prefix caching is on; a CPU tier larger than the GPU KV cache the server reported (a vLLM CPU tier at or below it
mirrors the GPU and adds next to no hits: ``cpu-tier-exceeds-gpu-kv``, one item per such arm, warned only).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from harness.config.arms import GIB, Arm
from harness.config.scenario import Scenario
from harness.decision.rules.host_contention import host_contention
from harness.plan.checks.tier_capacity import capacity_message, kv_bytes_per_token, mirrors_gpu
from harness.schema.summary import ArmSummary, CheckItem, FitItem, StepSummary
from harness.schema.validation import ValidationRecord

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


def reported_blocks(steps: Sequence[StepSummary]) -> tuple[int, int] | None:
    """The last ``(num_gpu_blocks, block_size)`` a server reported over these steps."""
    for step in reversed(steps):
        if step.server.num_gpu_blocks and step.server.gpu_block_size:
            return step.server.num_gpu_blocks, step.server.gpu_block_size
    return None


def resolved_tier(arm: Arm, validation: ValidationRecord | None) -> tuple[int, int | None, str]:
    """The arm's CPU tier bytes, KV bytes per token where vLLM resolved them, and where the tier figure came from."""
    result = next((r for r in validation.arms if r.arm == arm.name), None) if validation is not None else None
    resolved = result.resolved if result is not None else None
    off = resolved.offload if resolved is not None else None
    per_token = off.chunk_bytes // off.tokens_per_chunk if off and off.chunk_bytes and off.tokens_per_chunk else None
    if off is not None and off.cpu_bytes_to_use:
        return off.cpu_bytes_to_use, per_token, "as vLLM resolved it (validation.json)"
    gib = resolved.engine.kv_offloading_size_gib if resolved is not None else None
    if gib:
        return int(gib * GIB), per_token, "as vLLM resolved it (validation.json)"
    return arm.cpu_tier_bytes(), per_token, "as planned"


def _tier_hits(steps: Sequence[StepSummary]) -> str:
    cpu = [s.hit_tokens.cpu for s in steps if s.hit_tokens.cpu is not None]
    prompt = 0
    for step in steps:
        hits = step.hit_tokens
        parts = [hits.gpu, hits.cpu, hits.disk, hits.miss]
        prompt += hits.prompt if hits.prompt is not None else sum(p for p in parts if p is not None)
    if not cpu or prompt <= 0:
        return "the tier's own hits were not measured"
    return f"its CPU tier served {sum(cpu) / prompt:.1%} of the arm's prompt tokens ({sum(cpu)} of {prompt})"


def tier_capacity_items(scenario: Scenario, base: ArmSummary | None,
                        tier_steps: Mapping[str, Sequence[StepSummary]] | None = None,
                        validation: ValidationRecord | None = None) -> list[FitItem]:
    """A warning per arm whose CPU tier (vLLM's, which mirrors the GPU) is no larger than the GPU KV cache its server
    (else the baseline's) reported; an arm whose sizes are not known, or whose tier is larger, gets no item."""
    items: list[FitItem] = []
    steps_by_arm = tier_steps or {}
    for arm in scenario.arms[1:]:
        if arm.cpu_tier_bytes() <= 0 or not mirrors_gpu(scenario.engine_for(arm), arm):
            continue
        own = steps_by_arm.get(arm.name, [])
        reported, whose = reported_blocks(own), f"arm {arm.name}'s server"
        if reported is None and base is not None:
            reported, whose = reported_blocks(base.steps), f"the baseline's server ({base.name})"
        if reported is None:
            continue
        tier, per_token, tier_source = resolved_tier(arm, validation)
        bpt_source = "vLLM's resolved offload chunk (validation.json)"
        if per_token is None:
            found = kv_bytes_per_token(scenario, arm)
            per_token, bpt_source = found if found is not None else (None, "")
        blocks, block_size = reported
        if per_token is None:
            items.append(FitItem(name="cpu-tier-exceeds-gpu-kv", status="unknown", evidence=(
                f"arm {arm.name}: {whose} reported a GPU KV cache of {blocks} blocks x {block_size} tokens, but the "
                "model's KV bytes per token are not known here (declare checks.kv_bytes_per_token), so the "
                "CPU tier is not compared with it")))
            continue
        gpu = blocks * block_size * per_token
        if tier > gpu:
            continue
        source = (f"{blocks} blocks x {block_size} tokens x {per_token // 1024} KiB/token: the blocks as {whose} "
                  f"reported them (vllm:cache_config_info), the bytes per token from {bpt_source}")
        text = capacity_message(tier, gpu, source, per_token, tiered=arm.tier == "tiered", approx="")
        hits = _tier_hits(own) if own else "the tier's own hits were not given to the screen"
        items.append(FitItem(name="cpu-tier-exceeds-gpu-kv", status="warn",
                             evidence=f"arm {arm.name} (CPU tier {tier_source}): {text}; {hits}"))
    return items


def fit_screen(scenario: Scenario, base: ArmSummary | None, checks: Sequence[CheckItem],
               reuse: tuple[float | None, int], typical_prefix_tokens: float | None, *,
               tier_steps: Mapping[str, Sequence[StepSummary]] | None = None,
               validation: ValidationRecord | None = None) -> list[FitItem]:
    """All fit items (``tier_steps``: each tier arm's steps, for its own reported GPU KV cache and tier hits;
    ``validation``: what the engine resolved, for each tier's bytes)."""
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
    items += tier_capacity_items(scenario, base, tier_steps, validation)
    return items
