"""Build the power section of a plan from the scenario and the rates (:func:`plan_power`).

Per step: the expected requests (rate x planned duration, capped by a ``requests`` bound), the p50/p95/p99 it
resolves at ``rules.confidence``, and each rule at its own test level, with the same error arithmetic as the rules
(:func:`harness.stats.error_rates.regression_alpha` / :func:`~harness.stats.error_rates.keep_alpha`; sequential looks
divide alpha): the regression rule's percentile, each earns-its-keep measure, each budget's step percentile (at the
budget's own percentile); and the requests in one budget window, against what each budget percentile needs there.
Every comparison assumes the same rate on both sides (a measured rate is already the slowest arm's).
"""

from __future__ import annotations

from harness.config.rules import BudgetRule, EarnsKeepRule, RegressionRule
from harness.config.scenario import Scenario
from harness.config.steps import StepLevel
from harness.plan.power.model import (
    PercentileResolution,
    PowerInput,
    PowerPlan,
    RuleKind,
    RuleResolution,
    StepPower,
    WindowBound,
    WindowResolution,
)
from harness.plan.power.rates import level_rate
from harness.plan.power.resolve import (
    DEFAULT_SIGMA,
    DEFAULT_SIGMA_SOURCE,
    detectable_ratio,
    duration_for,
    highest_resolvable,
    needed,
    pass_limit,
    ranks_of,
    sample_percentiles,
)
from harness.stats.error_rates import keep_alpha, regression_alpha

METHOD = "order-statistic ranks (exact binomial, distribution-free), as every reported percentile"
ASSUMPTION = ("lognormal latency with spread sigma (log-scale standard deviation), two independent samples of the "
              "expected size per arm (pairing by request usually narrows the interval: the figures err cautious); "
              "only the detectable ratios use it")
HOW_TO_ESTIMATE = ("declare steps.levels[].expected_rps (completed requests/s per arm), or plan with --from-run "
                   "RUN_DIR (a previous run's steps.jsonl / summary.json)")
REPORTED = (50.0, 95.0, 99.0)
THROUGHPUT_MIN_SAMPLES = 10  # harness.stats.intervals.sum_ratio


def expected_requests(level: StepLevel, rps: float | None) -> int | None:
    """Requests the level should complete per arm: rate x duration, capped by its ``requests`` bound."""
    if level.duration_s is None:
        return level.requests
    if rps is None:
        return None
    n = int(rps * level.duration_s)
    return min(n, level.requests) if level.requests is not None else n


def _pct(n: int | None, q: float, confidence: float) -> PercentileResolution:
    need = needed(q, confidence)
    ranks = ranks_of(n, q, confidence) if n else None
    return PercentileResolution(percentile=q * 100, confidence=round(confidence, 6), needed=need,
                                resolved=None if n is None else ranks is not None, ranks=ranks,
                                sample_percentiles=sample_percentiles(n or 0, ranks))


def _fix(res: RuleResolution, n: int | None, rps: float | None, level: StepLevel) -> RuleResolution:
    """Add the fix to an unresolved rule: the duration that would suffice, and the highest percentile that can."""
    if res.resolved is not False or n is None:
        return res
    update: dict[str, float | None] = {}
    if rps is not None and level.duration_s is not None:
        update["duration_needed_s"] = duration_for(res.needed, rps)
    if res.percentile is not None and res.kind != "budget":  # a budget's percentile is its SLO: not the fix
        update["lower_percentile"] = highest_resolvable(n, res.confidence, below=res.percentile)
    return res.model_copy(update=update)


def _quantile_rule(name: str, kind: RuleKind, measure: str, pct: float, alpha_each: float, min_samples: int,
                   n: int | None, sigma: float, limit: float, power: float, with_pass: bool) -> RuleResolution:
    q = pct / 100.0
    confidence = 1.0 - 2.0 * alpha_each
    need = needed(q, confidence, min_samples)
    ranks = ranks_of(n, q, confidence) if n else None
    resolved = None if n is None else (ranks is not None and n >= need)
    det = detectable_ratio(n, q, alpha_each, sigma, limit, power) if n and resolved else None
    passing = pass_limit(n, q, alpha_each, sigma, power) if n and resolved and with_pass else None
    return RuleResolution(rule=name, kind=kind,
                          measure=measure, percentile=pct, alpha_each=alpha_each, confidence=round(confidence, 6),
                          needed=need, resolved=resolved, ranks=ranks, sample_percentiles=sample_percentiles(n or 0,
                                                                                                         ranks),
                          limit=limit, detectable_ratio=round(det, 4) if det else None,
                          pass_limit=round(passing, 4) if passing else None)


def _regression(rule: RegressionRule, n: int | None, alpha_each: float, sigma: float, power: float
                ) -> RuleResolution:
    return _quantile_rule(rule.label, "regression", f"p{rule.percentile:g} {rule.metric.upper()}", rule.percentile,
                          alpha_each, rule.min_samples, n, sigma, rule.max_ratio, power, with_pass=True)


def _keep(rule: EarnsKeepRule, n: int | None, alpha_each: float, sigmas: dict[str, float], power: float
          ) -> list[RuleResolution]:
    out = []
    for measure in rule.measures:
        metric, _, pct = measure.partition("_p")
        if metric in ("ttft", "itl", "e2e") and pct:
            out.append(_quantile_rule("earns-its-keep", "earns_keep", measure, float(pct), alpha_each,
                                      rule.min_samples, n, sigmas.get(metric, DEFAULT_SIGMA), rule.min_improvement,
                                      power, with_pass=False))
            continue
        need = max(rule.min_samples, THROUGHPUT_MIN_SAMPLES)  # output_tokens_per_s, goodput: ratios of sums
        out.append(RuleResolution(rule="earns-its-keep", kind="earns_keep", measure=measure, percentile=None,
                                  alpha_each=alpha_each, confidence=round(1.0 - 2.0 * alpha_each, 6), needed=need,
                                  resolved=None if n is None else n >= need, limit=rule.min_improvement,
                                  note="a ratio of sums, bootstrap interval; no lognormal figure"))
    return out


def _budget(rule: BudgetRule, n: int | None, confidence: float) -> RuleResolution:
    q = rule.percentile / 100.0
    ranks = ranks_of(n, q, confidence) if n else None
    return RuleResolution(rule=rule.label, kind="budget", measure=f"p{rule.percentile:g} {rule.metric.upper()}",
                          percentile=rule.percentile, alpha_each=None, confidence=round(confidence, 6),
                          needed=needed(q, confidence), resolved=None if n is None else ranks is not None,
                          ranks=ranks, sample_percentiles=sample_percentiles(n or 0, ranks),
                          note="judged per window, and per whole step when the windows cannot settle it")


def judged_budgets(scenario: Scenario) -> list[BudgetRule]:
    """Budget rules that will be judged (a budget is set; each is judged at its own percentile)."""
    return [b for b in scenario.rules.budgets if (b.budget_ms or scenario.slo.budget_ms(b.metric)) is not None]


def _window(budgets: list[BudgetRule], window_s: float, rps: float | None, confidence: float) -> WindowResolution:
    """The requests one budget window should hold, and whether they bound p99 and each budget's percentile."""
    per_window = rps * window_s if rps is not None else None

    def bound(pct: float) -> WindowBound:
        need = needed(pct / 100.0, confidence)
        return WindowBound(percentile=pct, needed=need, bounds=None if per_window is None else per_window >= need)

    p99 = bound(99.0)
    return WindowResolution(window_s=window_s, requests=round(per_window, 1) if per_window else None,
                            needed_p99=p99.needed, bounds_p99=p99.bounds,
                            percentiles=[bound(p) for p in sorted({b.percentile for b in budgets})])


def sigma_for(given: PowerInput) -> tuple[dict[str, float], str]:
    """The lognormal spread by metric and where it came from (declared > measured > calibrated > default)."""
    if given.sigma is not None:
        return {m: given.sigma for m in ("ttft", "itl", "e2e")}, f"declared (--sigma {given.sigma:g})"
    for found in (given.measured, given.calibrated):
        if found is not None and found.sigma:
            spread = {m: found.sigma.get(m, DEFAULT_SIGMA) for m in ("ttft", "itl", "e2e")}
            missing = [m for m in ("ttft", "itl", "e2e") if m not in found.sigma]
            return spread, (f"{found.source} from {found.detail}: ln(p95/p50)/1.645, median over steps"
                            + (f" ({', '.join(missing)}: default {DEFAULT_SIGMA:g})" if missing else ""))
    return {m: DEFAULT_SIGMA for m in ("ttft", "itl", "e2e")}, DEFAULT_SIGMA_SOURCE


def plan_power(scenario: Scenario, given: PowerInput | None = None) -> PowerPlan:
    """The power section (see module docs)."""
    given = given or PowerInput()
    rules, steps = scenario.rules, scenario.steps
    looks = steps.sequential.looks if steps.sequential.enabled else 1
    n_levels = len(steps.levels)
    sigmas, sigma_source = sigma_for(given)
    budgets = judged_budgets(scenario)
    out: list[StepPower] = []
    for index, level in enumerate(steps.levels):
        rate = level_rate(level, given)
        n = expected_requests(level, rate.rps)
        results: list[RuleResolution] = []
        for reg in rules.regression:
            res = _regression(reg, n, regression_alpha(reg.alpha, n_levels, looks), sigmas[reg.metric], given.power)
            results.append(_fix(res, n, rate.rps, level).model_copy(update={"deciding": not reg.dry_run}))
        if rules.earns_keep is not None:
            alpha_keep = keep_alpha(rules.earns_keep.alpha, n_levels, len(rules.earns_keep.measures), looks)
            results += [_fix(r, n, rate.rps, level) for r in _keep(rules.earns_keep, n, alpha_keep, sigmas,
                                                                     given.power)]
        results += [_fix(_budget(b, n, rules.confidence), n, rate.rps, level) for b in budgets]
        window = _window(budgets, rules.window_s, rate.rps, rules.confidence) if budgets else None
        out.append(StepPower(index=index, label=level.label, duration_s=level.duration_s, rps=rate.rps,
                             source=rate.source, source_detail=rate.detail, expected_requests=n,
                             percentiles=[_pct(n, p / 100.0, rules.confidence) for p in REPORTED], rules=results,
                             window=window))
    known = any(s.expected_requests is not None for s in out)
    notes = []
    if looks > 1:
        first = steps.sequential.min_fraction
        notes.append(f"sequential steps: every test's error is divided by {looks} looks; a step may end at a look "
                     f"once settled (the first at {first:.0%} of its duration holds about {first:.0%} of its requests)")
    return PowerPlan(confidence=rules.confidence, looks=looks, power=given.power, method=METHOD,
                     assumption=ASSUMPTION, sigma=sigmas, sigma_source=sigma_source, known=known,
                     how_to_estimate=None if all(s.source != "none" for s in out) else HOW_TO_ESTIMATE + (
                         ", or let the simulator tell: --calibrate" if scenario.engine.kind == "sim" else ""),
                     steps=out, notes=notes)
