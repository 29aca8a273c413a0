"""The calibration's pure parts: truth pooling, coverage counting, exact binomial intervals, bias, the truth cache,
and the plan's order (truths first, the rest interleaved)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tools.decision_bench.calibrate import _args, _interleave, coverage_rows, plan, truth_path
from tools.decision_bench.calibration import bias, binomial, coverage
from tools.decision_bench.truth import (
    StepPool,
    Truth,
    cache_path,
    design_key,
    load_truth,
    pool_truth,
    save_truth,
    truth_se,
)


def _parts(arm: list[float], base: list[float], arm_tok: float, arm_s: float, base_tok: float, base_s: float) -> tuple:
    return (np.asarray(arm), np.asarray(base), arm_tok, arm_s, base_tok, base_s)


def test_truth_pools_the_samples_of_every_rollout_before_taking_the_ratio() -> None:
    one = {0: _parts([1.0, 2.0, 3.0], [2.0, 4.0, 6.0], 100.0, 10.0, 50.0, 10.0)}
    two = {0: _parts([5.0, 6.0, 7.0], [10.0, 12.0, 14.0], 300.0, 10.0, 50.0, 10.0), 1: _parts([1.0], [3.0], 1, 1, 1, 1)}
    truth = pool_truth([one, two])
    pooled_arm, pooled_base = [1, 2, 3, 5, 6, 7], [2, 4, 6, 10, 12, 14]
    assert truth[0]["ttft_p50"] == pytest.approx(np.quantile(pooled_base, 0.5) / np.quantile(pooled_arm, 0.5))
    assert truth[0]["ttft_p95"] == pytest.approx(np.quantile(pooled_base, 0.95) / np.quantile(pooled_arm, 0.95))
    # throughput: pooled tokens over pooled seconds per arm (20 tok/s over 5 tok/s), not the mean of the ratios
    assert truth[0]["output_tokens_per_s"] == pytest.approx(4.0)
    assert truth[1]["ttft_p50"] == pytest.approx(3.0)


def test_a_side_without_data_leaves_its_measures_out() -> None:
    pool = StepPool()
    pool.add(np.asarray([np.nan]), np.asarray([1.0]), 0.0, 0.0, 5.0, 1.0)
    assert pool.truth() == {}


def test_coverage_counts_resolved_intervals_holding_the_truth_and_sets_unresolved_apart() -> None:
    cis = [{"lo": 0.9, "hi": 1.1, "resolved": True}, {"lo": 1.0, "hi": 1.2, "resolved": True},  # edge: covers
           {"lo": 1.05, "hi": 1.2, "resolved": True}, {"lo": None, "hi": None, "resolved": False},
           {"lo": 0.5, "hi": 2.0, "resolved": False}]
    cov = coverage(cis, 1.0)
    assert (cov.rate.k, cov.rate.n, cov.unresolved) == (2, 3, 2)


def test_binomial_is_the_exact_clopper_pearson_interval() -> None:
    r = binomial(0, 400)
    assert r.lo == 0.0 and r.hi == pytest.approx(1 - 0.025 ** (1 / 400), rel=1e-6)  # the k = 0 closed form
    r = binomial(19, 20)
    assert r.rate == pytest.approx(0.95) and r.lo == pytest.approx(0.7513, abs=1e-4) and r.hi == pytest.approx(
        0.99873, abs=1e-4)
    assert math.isnan(binomial(0, 0).lo) and binomial(0, 0).text() == "n/a"
    with pytest.raises(ValueError):
        binomial(3, 2)


def test_bias_is_the_mean_estimate_over_the_truth_with_a_t_interval() -> None:
    b = bias([1.0, 1.1, 1.2, None], 1.0)
    assert b.n == 3 and b.bias == pytest.approx(0.1)
    half = 4.302652729911275 * 0.1 / math.sqrt(3)  # t(0.975, 2) x sd / sqrt(n)
    assert (b.lo, b.hi) == (pytest.approx(0.1 - half), pytest.approx(0.1 + half))
    with pytest.raises(ValueError):
        bias([1.0], 0.0)


def test_truth_cache_round_trips_and_refuses_a_broken_file(tmp_path: Path) -> None:
    path = cache_path(tmp_path, "aa", 10.0, 1.0, 3, "abc")
    assert load_truth(path) is None
    save_truth(path, Truth({0: {"ttft_p50": 1.01, "ttft_p95": 1.2}}, {0: {"ttft_p50": 0.003, "ttft_p95": math.nan}}),
               {"case": "aa"})
    loaded = load_truth(path)
    assert loaded is not None and loaded.values == {0: {"ttft_p50": 1.01, "ttft_p95": 1.2}}
    assert loaded.of(0, "ttft_p50") == (1.01, 0.003)
    assert loaded.of(0, "ttft_p95") == (1.2, None), "an unknown error is None, not NaN"
    assert loaded.of(1, "ttft_p50") == (None, None)
    path.write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="not a truth cache"):
        load_truth(path)


def test_plan_runs_missing_truths_first_and_interleaves_the_rest(tmp_path: Path) -> None:
    args = _args(["--out", str(tmp_path), "--aa-runs", "3", "--benefit-runs", "1", "--coverage-runs", "2",
                  "--truth-seeds", "2"])
    jobs = plan(args, cached={"aa"})
    assert [(j.kind, j.case) for j in jobs[:2]] == [("truth", "benefit-fixed")] * 2
    assert jobs[0].step_s == 10.0 and jobs[0].run_drift == 0.0 and jobs[0].sequential is False, \
        "the truth is of the design the coverage rollouts run: same step length, fixed horizon, no drift"
    assert jobs[0].seed >= 90_000 > max(j.seed for j in jobs[2:] if j.kind == "coverage"), "disjoint seeds"
    rest = [(j.kind, j.case) for j in jobs[2:]]
    assert rest[:4] == [("coverage", "aa"), ("coverage", "benefit-fixed"), ("decision", "aa"),
                        ("decision", "benefit")]
    assert rest.count(("decision", "aa")) == 3 and len(rest) == 8
    assert _interleave([[1, 2, 3], [4]]) == [1, 4, 2, 3]  # type: ignore[list-item]


def test_coverage_rows_check_the_aa_case_against_one_too() -> None:
    est = {"0": {m: {"ratio": 1.02, "lo": 0.99, "hi": 1.05, "resolved": True}
                 for m in ("ttft_p50", "ttft_p95", "output_tokens_per_s")}}
    results = [{"job": {"kind": "coverage", "case": "aa", "seed": s}, "status": "ok", "estimates": est}
               for s in range(3)]
    truth = Truth({0: {"ttft_p50": 1.06, "ttft_p95": 1.0, "output_tokens_per_s": 1.0}},
                  {0: {"ttft_p50": 0.004, "ttft_p95": 0.01, "output_tokens_per_s": 0.002}})
    rows = coverage_rows(results, {"aa": truth})
    p50 = [r for r in rows if r["measure"] == "ttft_p50"]
    assert [(r["truth_from"], r["coverage"]["k"], r["coverage"]["n"]) for r in p50] == [
        ("truth rollouts", 0, 3), ("exactly 1", 3, 3)]
    assert p50[0]["truth_se"] == 0.004
    assert p50[1]["bias"]["bias"] == pytest.approx(0.02)


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        _args(["--out", str(tmp_path), "--jobs", "0"])
    assert exc.value.code == 2


def test_the_truths_error_is_the_spread_over_its_rollouts_and_its_cache_key_follows_the_design(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    rollouts = [{0: _parts(list(rng.gamma(4.0, 1.0, 200)), list(rng.gamma(4.0, 1.3, 200)), 100.0, 10.0, 80.0, 10.0)}
                for _ in range(12)]
    values = pool_truth(rollouts)
    se = truth_se(rollouts, values, resamples=100)
    assert 0.005 < se[0]["ttft_p50"] < 0.1, se
    assert se[0]["output_tokens_per_s"] == pytest.approx(0.0, abs=1e-12), "every rollout has the same throughput"
    assert math.isnan(truth_se(rollouts[:1], values)[0]["ttft_p50"]), "one rollout: no error to give"
    a = _args(["--out", str(tmp_path)])
    longer = _args(["--out", str(tmp_path), "--truth-factor", "20"])
    assert truth_path(a, "aa") != truth_path(longer, "aa") != truth_path(a, "benefit-fixed")
    assert design_key({"x": 1, "y": [2]}) == design_key({"y": [2], "x": 1}) != design_key({"x": 2, "y": [2]})
