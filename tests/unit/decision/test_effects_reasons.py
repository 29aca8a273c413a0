"""Effect sizes first: the reason list starts with the rule that decided (go: the improvement that cleared its limit;
no-go: the harm; hold: what is missing, with what would settle it), every reason of today kept; the effect table's
rows are the rules' own comparisons, with their interval, limit, outcome and source."""

from __future__ import annotations

import math

import numpy as np

from harness.config.rules import EarnsKeepRule, RegressionRule
from harness.decision.decide import decide_arm, verdict
from harness.decision.effects import (
    keep_outcome,
    keep_rows,
    keep_settle,
    mark_deciding,
    regression_rows,
    settle_factor,
    settle_hints,
)
from harness.decision.evaluate import RegressionComparison
from harness.decision.evidence import StepSample
from harness.decision.rules.keep import judge_earns_keep
from harness.schema.intervals import RatioCI
from harness.schema.summary import ArmSummary, BreakEven, EffectRow, RuleResult, StepSummary

RNG = np.random.default_rng(11)


def rr(kind: str, status: str, rule: str | None = None, *, step: int | None = None, critical: bool = False,
       dry_run: bool = False) -> RuleResult:
    name = rule or f"{kind}-rule"
    return RuleResult(rule=name, kind=kind, status=status, critical=critical, dry_run=dry_run,  # type: ignore[arg-type]
                      step=step, message=f"{name} {status}" + (f" at {step}" if step is not None else ""))


def reasons(rules: list[RuleResult], hints: dict[tuple[str, int | None], str] | None = None) -> tuple[str, list[str]]:
    decision, out, _findings = decide_arm(is_baseline=False, failure=None, ran=True, rules=rules, prev_name="baseline",
                               hints=hints)
    return decision, out


# Rules in evaluation order, as the summary builds them: budgets, regression per step, errors, keep, cause, health.
GO_RULES = [rr("budget", "pass", "ttft-p99-budget"), rr("budget", "pass", "itl-p99-budget"),
            rr("regression", "pass", "ttft-p90-vs-baseline", step=0), rr("regression", "pass", "ttft-p90-vs-baseline",
                                                                          step=1),
            rr("errors", "pass", "error-rate"), rr("earns_keep", "pass", "earns-its-keep"),
            rr("causal", "pass", "own-tier-hits"), rr("tier_health", "pass", "tier-health"),
            rr("fit", "pass", "fit-screen")]


def test_go_starts_with_the_improvement_that_decided_and_keeps_every_reason() -> None:
    decision, out = reasons(GO_RULES)
    assert decision == "go"
    assert out[0] == "earns-its-keep: earns-its-keep pass"
    assert out[1:3] == ["ttft-p90-vs-baseline: ttft-p90-vs-baseline pass at 0",
                        "ttft-p90-vs-baseline: ttft-p90-vs-baseline pass at 1"]  # no harm next, steps in order
    assert sorted(out) == sorted(f"{r.rule}: {r.message}" for r in GO_RULES)  # moved, none dropped
    assert out.index("ttft-p99-budget: ttft-p99-budget pass") > out.index("own-tier-hits: own-tier-hits pass")


def test_no_go_starts_with_the_harm_shown_before_budgets_and_errors() -> None:
    rules = [rr("budget", "breach", "ttft-p99-budget", critical=True), rr("regression", "pass", "reg", step=0),
             rr("regression", "breach", "reg", step=1), rr("errors", "breach", "error-rate", critical=True),
             rr("earns_keep", "unresolved", "earns-its-keep")]
    decision, out = reasons(rules)
    assert decision == "no-go"
    assert out[0] == "reg: reg breach at 1"
    assert out[1] == "critical rule error-rate: error-rate breach"
    assert out[2] == "critical rule ttft-p99-budget: ttft-p99-budget breach"
    assert out[3].startswith("earns-its-keep unresolved")  # holds still follow the vetoes


def test_hold_starts_with_what_is_missing_and_says_what_would_settle_it() -> None:
    rules = [rr("budget", "unresolved", "ttft-p99-budget"), rr("regression", "unresolved", "reg", step=0),
             rr("regression", "pass", "reg", step=1), rr("earns_keep", "unresolved", "earns-its-keep"),
             rr("causal", "pass", "own-tier-hits")]
    hints = {("earns-its-keep", None): "~2.0x the requests would show the improvement",
             ("reg", 0): "~1.5x the requests would show it within the limit"}
    decision, out = reasons(rules, hints)
    assert decision == "hold"
    assert out[0] == ("earns-its-keep unresolved: earns-its-keep unresolved — to settle it: ~2.0x the requests would "
                      "show the improvement")
    assert out[1] == "reg unresolved: reg unresolved at 0 — to settle it: ~1.5x the requests would show it within " \
                     "the limit"
    assert out[2] == "ttft-p99-budget unresolved: ttft-p99-budget unresolved"


def test_hold_puts_cause_before_credit() -> None:
    rules = [rr("regression", "unresolved", "reg", step=0), rr("earns_keep", "pass", "earns-its-keep"),
             rr("causal", "breach", "own-tier-hits"), rr("fit", "breach", "fit-screen")]
    decision, out = reasons(rules)
    assert decision == "hold"
    assert [r.split(":")[0] for r in out] == ["own-tier-hits", "fit-screen", "reg unresolved"]


def test_slo_unmet_keeps_the_shared_breach_first_then_the_improvement() -> None:
    rules = [rr("budget", "breach", "ttft-p99-budget", critical=True).model_copy(update={"shared_with_baseline": True}),
             rr("regression", "pass", "reg", step=0), rr("earns_keep", "pass", "earns-its-keep")]
    decision, out = reasons(rules)
    assert decision == "slo-unmet"
    assert out[0].startswith("ttft-p99-budget: ") and out[1] == "earns-its-keep: earns-its-keep pass"


def _arm(name: str, decision: str, be: str | None = None) -> ArmSummary:
    return ArmSummary(name=name, tier="cpu" if name != "base" else "gpu-only", decision=decision,  # type: ignore[arg-type]
                      reasons=[f"{name} first reason"],
                      break_even=BreakEven(status="helps-everywhere", text=be) if be else None)


def test_the_verdict_line_carries_the_break_even_load() -> None:
    v = verdict([_arm("base", "baseline"), _arm("cpu", "go", "helps at every step tested (c8-c32)"),
                 _arm("tiered", "hold", "never shown")])
    assert v.reason == ("ship cpu — break-even of cpu: helps at every step tested (c8-c32); the next tier (tiered) "
                        "is hold")
    v = verdict([_arm("base", "baseline"), _arm("cpu", "no-go", "break-even between c2 and c32")])
    assert v.verdict == "no-go" and v.reason.endswith("(cpu first reason; break-even of cpu: break-even between c2 "
                                                      "and c32)")
    assert verdict([_arm("base", "baseline"), _arm("cpu", "go")]).reason == "ship cpu"  # none computed: unchanged


# --- the table's rows ---------------------------------------------------------------------------------------------


def sample(values: np.ndarray, n_tokens: float = 16.0) -> StepSample:
    keys = np.asarray([f"k{i}" for i in range(len(values))])
    return StepSample(ttft=values, e2e=values * 2, itl=values / 10, keys=keys,
                      tokens=np.full(len(values), n_tokens), good=np.ones(len(values)), duration_s=30.0)


def test_keep_rows_are_the_rules_comparisons_with_limit_outcome_and_source() -> None:
    rule = EarnsKeepRule(measures=["ttft_p95", "output_tokens_per_s"], min_improvement=1.05, min_samples=10)
    base = RNG.lognormal(np.log(400), 0.3, 600)
    steps = [StepSummary(index=0, label="c2", concurrency=2, duration_s=30.0, requests=600),
             StepSummary(index=1, label="c32", concurrency=32, duration_s=30.0, requests=600)]
    mine = {0: sample(base * 1.0), 1: sample(base / 1.6, n_tokens=24.0)}  # c32: faster and more tokens per request
    theirs = {0: sample(base), 1: sample(base)}
    ev = judge_earns_keep(rule, steps, mine, theirs, "baseline", n_steps=2, floors={0: 1.0, 1: 1.02})
    assert ev.result.status == "pass" and ev.winner is not None and ev.winner.step.index == 1
    rows = keep_rows(ev, "earns-its-keep", 1.05, "baseline")
    assert [(r.label, r.measure) for r in rows] == [("c2", "ttft_p95"), ("c2", "output_tokens_per_s"),
                                                   ("c32", "ttft_p95"), ("c32", "output_tokens_per_s")]
    deciding = [r for r in rows if r.deciding]
    assert len(deciding) == 1 and deciding[0].interval == ev.result.interval  # the row the reason names
    c32 = [r for r in rows if r.label == "c32"]
    assert all(r.outcome == "improvement shown" and r.limit == round(1.05 * 1.02, 4) for r in c32)
    assert all(r.limit_text == "min_improvement 1.05 x noise floor 1.020" for r in c32)
    c2 = [r for r in rows if r.label == "c2"]
    assert all(r.outcome in ("not settled", "short of the limit") and r.limit == 1.05 for r in c2)
    for r in rows:
        assert r.interval.resolved and r.interval.lo is not None and r.interval.hi is not None
        assert (r.n, r.n_versus) == (600, 600) and r.versus == "baseline"
        assert r.source.startswith(f"requests.parquet, step {r.step} ({r.label}): 600 vs 600 (baseline) requests")
        assert f"{r.interval.confidence:.1%}" in r.source
        assert (r.settle is not None) == (r.outcome in ("not settled", "not judged"))


def _reg_comparison(status: str, ci: RatioCI | None, step: int, floor: float = 1.0, n: int = 400,
                    dry_run: bool = False) -> RegressionComparison:
    rule = RegressionRule(metric="ttft", percentile=90, max_ratio=1.10, dry_run=dry_run)
    st = StepSummary(index=step, label=f"c{2 ** (step + 1)}", concurrency=2 ** (step + 1), duration_s=20.0,
                     requests=n)
    result = RuleResult(rule=rule.label, kind="regression", status=status, step=step,  # type: ignore[arg-type]
                        message="m", interval=ci, threshold=1.10)
    return RegressionComparison(rule, st, result, floor, n, n, 200)


def ci(ratio: float, lo: float, hi: float, confidence: float = 0.99) -> RatioCI:
    return RatioCI(ratio=ratio, lo=lo, hi=hi, resolved=True, confidence=confidence, method="percentile bootstrap")


def test_regression_rows_hold_the_harm_limit_and_the_within_limit_with_the_floor() -> None:
    comps = [_reg_comparison("breach", ci(1.4, 1.25, 1.6), 0), _reg_comparison("pass", ci(0.8, 0.7, 0.9), 1, 1.02),
             _reg_comparison("unresolved", ci(1.08, 0.98, 1.2), 2, 1.02),
             _reg_comparison("not-applicable", None, 3, n=50),
             _reg_comparison("breach", ci(2.0, 1.8, 2.2), 4, dry_run=True)]
    rows = regression_rows(comps, "baseline")
    assert [r.outcome for r in rows] == ["harm shown", "within limit", "not settled", "not judged"]  # no dry run
    assert rows[0].test == "harm" and rows[0].measure == "p90 TTFT" and rows[0].limit == 1.1
    assert rows[1].limit == round(1.1 * 1.02, 4) and rows[1].pass_limit == round(1.1 / 1.02, 4)
    assert rows[2].settle is not None and "more load does not settle it" in rows[2].settle  # inside the floor band
    assert rows[3].settle is not None and rows[3].settle.startswith("200 requests on each side resolve")
    assert rows[0].settle is None and rows[1].settle is None
    marked = mark_deciding(rows, "no-go", [c.result for c in comps])
    assert [r.deciding for r in marked] == [True, False, False, False]


def _row(test: str, outcome: str, ratio: float, lo: float, hi: float, limit: float, pass_limit: float | None = None,
         step: int = 0) -> EffectRow:
    return EffectRow(rule="r", test=test, measure="output_tokens_per_s" if test == "improvement" else "p90 TTFT",  # type: ignore[arg-type]
                     step=step, label=f"c{step}", versus="b", interval=ci(ratio, lo, hi), limit=limit,
                     pass_limit=pass_limit, outcome=outcome, n=300, n_versus=300)  # type: ignore[arg-type]


def test_settle_factor_is_the_interval_narrowing_as_one_over_sqrt_n() -> None:
    factor, way = settle_factor(_row("improvement", "not settled", 1.2, 1.0, 1.4, 1.05))
    assert way == "show the improvement"
    assert factor is not None and math.isclose(factor, (math.log(1.2) / math.log(1.2 / 1.05)) ** 2)
    factor, way = settle_factor(_row("improvement", "not settled", 1.0, 0.9, 1.1, 1.05))
    assert way == "show it short of the limit" and factor is not None
    assert math.isclose(factor, (math.log(1.1) / math.log(1.05)) ** 2)
    factor, way = settle_factor(_row("harm", "not settled", 1.3, 1.05, 1.5, 1.1, 1.1))
    assert way == "show the harm" and factor is not None
    assert math.isclose(factor, (math.log(1.3 / 1.05) / math.log(1.3 / 1.1)) ** 2)
    assert settle_factor(_row("improvement", "not settled", 1.05, 0.9, 1.2, 1.05))[0] is None  # on the limit


def test_keep_settle_prefers_the_cheapest_route_to_the_improvement() -> None:
    step = StepSummary(index=0, label="c0", duration_s=20.0, requests=300)
    from harness.decision.effects import settle_text

    rows = []
    for r in (_row("improvement", "not settled", 1.2, 1.0, 1.4, 1.05),
              _row("improvement", "not settled", 1.4, 1.01, 1.9, 1.05, step=1),
              _row("improvement", "short of the limit", 0.9, 0.85, 0.95, 1.05, step=2)):
        rows.append(r.model_copy(update={"settle": settle_text(r, step)}))
    assert keep_outcome  # imported for the table's vocabulary
    text = keep_settle(rows)
    assert text is not None and text.startswith("at c1, output_tokens_per_s 1.40x [1.01, 1.90] needs 1.05x:")
    assert "would show the improvement" in text and "about" in text
    hints = settle_hints(rows)
    assert hints == {("r", None): text}


def test_a_hold_marks_the_comparisons_of_the_rule_that_holds_it() -> None:
    rows = [_row("improvement", "not settled", 1.2, 1.0, 1.4, 1.05),
            _row("improvement", "short of the limit", 0.9, 0.85, 0.95, 1.05, step=1),
            _row("harm", "not settled", 1.3, 1.05, 1.5, 1.1, 1.1, step=1),
            _row("harm", "within limit", 0.9, 0.8, 1.0, 1.1, 1.1, step=2)]
    keep_open = [rr("earns_keep", "unresolved", "earns-its-keep"), rr("regression", "unresolved", "r", step=1)]
    assert [r.deciding for r in mark_deciding(rows, "hold", keep_open)] == [True, False, False, False]
    reg_open = [rr("earns_keep", "pass", "earns-its-keep"), rr("regression", "unresolved", "r", step=1)]
    assert [r.deciding for r in mark_deciding(rows, "hold", reg_open)] == [False, False, True, False]
    no_cause = [rr("causal", "breach", "own-tier-hits"), *keep_open]  # cause before credit: no row decided it
    assert not any(r.deciding for r in mark_deciding(rows, "hold", no_cause))
    short = RuleResult(rule="earns-its-keep", kind="earns_keep", status="breach", message="m",
                       interval=rows[1].interval)
    assert [r.deciding for r in mark_deciding(rows, "hold", [short])] == [False, True, False, False]


def test_an_unresolved_budget_says_what_more_load_would_settle_it() -> None:
    from harness.config.rules import BudgetRule
    from harness.decision.effects import budget_hints
    from harness.schema.intervals import Percentiles, QuantileCI

    def st(index: int, p99: float, lo: float | None, hi: float | None, n: int) -> StepSummary:
        ci = QuantileCI(lo=lo, hi=hi, resolved=lo is not None and hi is not None, n=n)
        return StepSummary(index=index, label=f"c{index}", duration_s=20.0, requests=n,
                           ttft_ms=Percentiles(p99=p99, p99_ci=ci, count=n))

    rule = BudgetRule(metric="ttft", critical=True)
    result = RuleResult(rule=rule.label, kind="budget", status="unresolved", message="m", threshold=2000.0)
    steps = [st(0, 900.0, 700.0, None, 100), st(1, 1900.0, 1500.0, 2400.0, 600), st(2, 800.0, 700.0, 900.0, 600)]
    hints = budget_hints([rule], [result], steps, 0.95)
    text = hints[(rule.label, None)]
    assert text.startswith("at c0, 368 requests bound p99 TTFT: ~3.7x the requests (368 instead of 100")
    factor = (math.log(2400 / 1900) / math.log(2000 / 1900)) ** 2
    assert f"at c1, p99 TTFT as measured, ~{factor:.1f}x the requests" in text and "would show it within" in text
    assert "c2" not in text  # settled there
    settled = result.model_copy(update={"status": "pass"})
    assert budget_hints([rule], [settled], steps, 0.95) == {}
