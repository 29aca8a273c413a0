"""Calibration: the simulator's physics against published measurements, one test per anchor.

Each test names its source (URL, date) and the published figure in its docstring, and prints the simulator's
figure next to it (``pytest -s`` shows the table). Tolerances are stated per test. The profiles' numbers come from
datasheets, config.json files and kernel microbenchmarks (see the YAML comments); none is fitted to these anchors,
so a failure here is a finding about the simulator's physics, not a number to tune away.

Anchors checked and not used (see /tmp/calibration-notes.md of issue 23 item 3): Dynamo KVBM's "If the CPU cache is
smaller than the device cache, KVBM churns ... and you may see performance degradation" (confirmed in the KVBM
configuration reference, but KVBM is not what the simulator models, and the simulator charges no cost to stores);
SGLang HiCache "an L3 file-tier hit slower than recompute on some hardware" (only user reports were found, no
published figure).
"""

from __future__ import annotations

import time

import httpx
import pytest

from harness.sim.calibration import (
    VLLM_BLOG_FIG1,
    VLLM_BLOG_FIG1_RANGE,
    VLLM_BLOG_FIG2,
    batch_throughput,
    gpu_kv_gib,
    shared_prefix_run,
    single_request_ttft,
)
from harness.sim.groundtruth import read_ground_truth
from tests.support.sim import running_sim

PROFILE = "h100-llama3-8b"  # the blog's hardware and model: Llama-3.1-8B-Instruct bf16 on one H100 80GB HBM3
CPU_GIB = 64.0  # holds a 100k-token prompt (12.2 GiB) with room to spare
TOL = 0.25  # relative tolerance on a published figure (the figures are read off charts; the model is a roofline)


def _fig1_points() -> list[tuple[int, float, float, float]]:
    """(prompt tokens, recompute ms, CPU-hit ms, miss-with-tier ms) of the simulator at the blog's prompt lengths."""
    out = []
    for tokens in (512, 1_000, *(t for t, _rc, _hit in VLLM_BLOG_FIG1)):
        p = single_request_ttft(tokens, CPU_GIB, profile=PROFILE)
        assert p.cpu_hit_tokens >= tokens - 16, f"{tokens}-token prompt: only {p.cpu_hit_tokens} tokens hit the CPU"
        out.append((tokens, p.recompute_s * 1e3, p.cpu_hit_s * 1e3, p.miss_with_tier_s * 1e3))
    return out


def test_cpu_hit_ttft_ratio_within_vllm_blog_range() -> None:
    """vLLM blog, "Inside vLLM's New KV Offloading Connector" (Or Ozeri, Danny Harnik; 2026-01-08),
    https://blog.vllm.ai/2026/01/08/kv-offloading-connector.html, Figure 1 and text: for one request on
    Llama-3.1-8B-Instruct / NVIDIA H100 80GB HBM3 (GPU prefix caching disabled, GPU and CPU block 16 tokens),
    "loading KV values from the CPU reduces TTFT by X2-X22, depending on the prompt size" (Figure 1: prompts of
    1k-100k tokens); for 512-token prompts "TTFT for this prompt size only decreased by X2".

    Checked: every ratio (recompute / CPU hit) from 512 to 100k tokens lies in [2/1.25, 22 x 1.25]; the 512-token
    ratio is within 25% of 2 and the 100k-token ratio within 25% of 22; the ratio grows with the prompt."""
    points = _fig1_points()
    ratios = [rc / hit for _t, rc, hit, _miss in points]
    table = "\n".join(f"  {t:>7} tokens: recompute {rc:7.1f} ms, CPU hit {hit:6.1f} ms, ratio {rc / hit:5.2f}"
                      for t, rc, hit, _miss in points)
    print(f"\nsimulated TTFT, {PROFILE} (published range x{VLLM_BLOG_FIG1_RANGE[0]:g}-x{VLLM_BLOG_FIG1_RANGE[1]:g}):\n"
          f"{table}")
    lo, hi = VLLM_BLOG_FIG1_RANGE
    outside = [(p[0], r) for p, r in zip(points, ratios, strict=True) if not lo / (1 + TOL) <= r <= hi * (1 + TOL)]
    assert not outside, f"ratios outside x{lo / (1 + TOL):.2f}-x{hi * (1 + TOL):.1f}: {outside}\n{table}"
    assert abs(ratios[0] / lo - 1) <= TOL, f"512 tokens: x{ratios[0]:.2f}, published x{lo:g}\n{table}"
    assert abs(ratios[-1] / hi - 1) <= TOL, f"100k tokens: x{ratios[-1]:.2f}, published x{hi:g}\n{table}"
    assert ratios == sorted(ratios), f"the ratio should grow with the prompt\n{table}"


def test_ttft_points_match_vllm_blog_figure1() -> None:
    """vLLM blog 2026-01-08 (https://blog.vllm.ai/2026/01/08/kv-offloading-connector.html), Figure 1 ("Single
    Request TTFT, Llama-3.1-8B-Instruct, NVIDIA H100"), read from the figure's pixels (harness.sim.calibration.
    VLLM_BLOG_FIG1): e.g. 10k tokens 263 ms recomputed / 42 ms from CPU, 100k tokens 6850 / 310 ms.

    Checked at 10k-100k tokens: the simulated recompute TTFT, CPU-hit TTFT and their ratio each within 25% of the
    figure (the 1k point sits on the axis and is not read)."""
    sim = {t: (rc, hit) for t, rc, hit, _miss in _fig1_points()}
    rows, bad = [], []
    for tokens, pub_rc, pub_hit in VLLM_BLOG_FIG1:
        rc, hit = sim[tokens]
        errs = (rc / pub_rc - 1, hit / pub_hit - 1, (rc / hit) / (pub_rc / pub_hit) - 1)
        rows.append(f"  {tokens:>7}: recompute {pub_rc:5.0f}/{rc:6.0f} ms ({errs[0]:+.0%}), CPU hit {pub_hit:3.0f}/"
                    f"{hit:5.1f} ms ({errs[1]:+.0%}), ratio {pub_rc / pub_hit:4.1f}/{rc / hit:4.1f} ({errs[2]:+.0%})")
        if max(abs(e) for e in errs) > TOL:
            bad.append(tokens)
    table = "\n".join(rows)
    print(f"\nFigure 1, published/simulated:\n{table}")
    assert not bad, f"points off by more than {TOL:.0%}: {bad}\n{table}"


def test_zero_hit_offload_costs_at_most_a_few_percent() -> None:
    """vLLM blog 2026-01-08 (https://blog.vllm.ai/2026/01/08/kv-offloading-connector.html): "using the offloading
    connector has minimal effect on TTFT for cache misses" (stores are asynchronous), and Figure 2 (10,000 unique
    512-token prefill requests, GPU prefix cache off): at 0% CPU hit rate ~42.3k tokens/s with offloading vs
    ~43.8k without (read from the figure: 3.3% slower).

    Checked: with a CPU tier but no hit, single-request TTFT (512 to 100k tokens) and the 512-token batch
    throughput are at most 5% worse than without the tier (and not better). The simulator charges nothing to the
    asynchronous stores, so it reads 0.0% where the blog measured ~3%: optimistic by that much."""
    worst_ttft = max(miss / rc - 1 for _t, rc, _hit, miss in _fig1_points())
    base, _ = batch_throughput(1000, 512, 0.0, None, profile=PROFILE)
    tier, share = batch_throughput(1000, 512, 0.0, 80.0, profile=PROFILE)
    cost = 1 - tier / base
    published = 1 - VLLM_BLOG_FIG2["hit_0"] / VLLM_BLOG_FIG2["no_offload"]
    print(f"\n0% hits: TTFT cost of the tier at most {worst_ttft:+.1%}; batch throughput {base:.0f} -> {tier:.0f} "
          f"tokens/s ({cost:+.1%}; published {published:+.1%})")
    assert share == 0.0
    assert 0.0 <= worst_ttft <= 0.05, f"a miss with the CPU tier costs {worst_ttft:+.1%} TTFT"
    assert -0.005 <= cost <= 0.05, f"0%-hit offload arm: {cost:+.1%} throughput (published {published:+.1%})"


def test_full_cpu_hit_batch_throughput_gain_matches_vllm_blog() -> None:
    """vLLM blog 2026-01-08 (https://blog.vllm.ai/2026/01/08/kv-offloading-connector.html), Figure 2 and text:
    10,000 unique 512-token prefill requests on Llama-3.1-8B-Instruct / H100, GPU prefix cache off: "throughput
    increases by up to X9"; read from the figure, ~387k tokens/s at 100% CPU hit rate vs ~43.8k without offloading
    (x8.84).

    Checked: with every prompt warmed into the CPU tier, the simulated throughput gain over no offload is within
    25% of x8.84 (1,000 requests: the throughput is that of the steady state). The intermediate hit rates are not
    checked: the blog does not say how it built them (see the calibration notes)."""
    base, _ = batch_throughput(1000, 512, 0.0, None, profile=PROFILE)
    full, share = batch_throughput(1000, 512, 1.0, 80.0, profile=PROFILE)
    published = VLLM_BLOG_FIG2["hit_100"] / VLLM_BLOG_FIG2["no_offload"]
    gain = full / base
    print(f"\n100% CPU hits: {base:.0f} -> {full:.0f} tokens/s, x{gain:.2f} (published x{published:.2f}: "
          f"{VLLM_BLOG_FIG2['no_offload']:.0f} -> {VLLM_BLOG_FIG2['hit_100']:.0f}); {share:.1%} of tokens from CPU")
    assert share >= 0.96
    assert abs(gain / published - 1) <= TOL, f"x{gain:.2f} vs published x{published:.2f}"


def test_cpu_tier_smaller_than_gpu_cache_adds_no_hit_rate() -> None:
    """vLLM docs, KV Offloading Usage Guide, "Tuning Tips" (docs/features/kv_offloading_usage.md in
    vllm-project/vllm; https://docs.vllm.ai/en/stable/features/kv_offloading_usage/): "For single-tier (CPU-only)
    setups, set cpu_bytes_to_use larger than the aggregate GPU KV cache. Because offloading is immediate, a smaller
    CPU tier just mirrors what the GPU already holds and adds no hit rate." (AWS Neuron's vLLM guide "How to use CPU
    KV offloading", modified 2026-11-20, says the same more softly: "A host tier that is not larger than HBM adds few
    hits.")

    Workload: 300 requests, one at a time (the claim is about what the tiers hold; concurrency adds effects of its
    own, see the calibration notes), each a uniformly drawn shared prefix of 1,500 tokens (12 or 24 of them: 2x or
    4x the GPU KV cache) plus a 16-token unique suffix, on h100-llama3-70b-fp8 (558 GPU blocks, 8,928 tokens).
    Checked: CPU tiers of 0.5x and 0.9x the GPU KV cache serve at most 2% of prompt tokens and change mean TTFT by
    at most 3%, while a 4x tier serves at least 30% and cuts TTFT by at least 30% (the workload can use a tier).
    A tier exactly the GPU's size is measured and printed, and must stay below a quarter of the 4x tier's share."""
    profile = "h100-llama3-70b-fp8"
    gpu = gpu_kv_gib(profile=profile)
    lines = []
    for families in (12, 24):
        def arm(frac: float | None, families: int = families) -> tuple[float, float]:
            r = shared_prefix_run(families, 1500, 300, 1, None if frac is None else frac * gpu, profile=profile)
            return r.cpu_share, r.mean_ttft_s

        _none_share, base = arm(None)
        control_share, control = arm(4.0)
        exact_share, exact = arm(1.0)
        lines.append(f"  {families} prefixes: no tier TTFT {base * 1e3:.0f} ms; 4x tier {control_share:.1%} of tokens "
                     f"from CPU, TTFT {control / base - 1:+.0%}; 1.0x tier {exact_share:.1%}, {exact / base - 1:+.1%}")
        for frac in (0.5, 0.9):
            share, ttft = arm(frac)
            lines.append(f"    {frac}x tier ({frac * gpu:.2f} GiB): {share:.2%} of prompt tokens from CPU, "
                         f"TTFT {ttft / base - 1:+.1%}")
            assert share <= 0.02 and abs(ttft / base - 1) <= 0.03, "\n".join(lines)
        assert control_share >= 0.30 and control / base <= 0.70, "\n".join(lines)
        assert exact_share < control_share / 4, "\n".join(lines)
    print(f"\nGPU KV cache {gpu:.2f} GiB; CPU tiers at or below it:\n" + "\n".join(lines))


@pytest.mark.timeout(60)
def test_served_simulator_shows_the_same_ttft_physics() -> None:
    """The same anchor as test_cpu_hit_ttft_ratio_within_vllm_blog_range (vLLM blog 2026-01-08, Figure 1: x2-x22),
    through the HTTP server (running_sim, in process, real time): a 20k-word prompt recomputed, then promoted from
    the CPU tier. Checked: the ground truth attributes the second request to the CPU tier; the served TTFTs are no
    shorter than the modelled ones; their ratio lies in the published range (25% tolerance). The served figures
    include the server's own Python time, so they are compared loosely."""
    words = 20_000
    model = single_request_ttft(words, 16.0, profile=PROFILE)
    with running_sim(in_process=True, profile=PROFILE, enable_prefix_caching=False, kv_offloading_size=16,
                     time_scale=1.0) as sim, httpx.Client(base_url=sim.base_url, timeout=60) as client:
        for prefix in ("a", "a", "b"):
            resp = client.post("/v1/completions", json={"model": "sim-model", "max_tokens": 1,
                                                        "prompt": " ".join(f"{prefix}{i}" for i in range(words))})
            assert resp.status_code == 200, resp.text
            time.sleep(0.2)  # the first request's stores end (~57 ms modelled) before the repeat arrives
        assert sim.ground_truth_path is not None
        records = read_ground_truth(sim.ground_truth_path)
    ttft = [(r["first_token_sent_ns"] - r["arrival_ns"]) / 1e9 for r in records]
    assert [r["prompt_tokens"] for r in records] == [words] * 3
    assert records[1]["cpu_hit_tokens"] >= words - 16 and records[2]["cpu_hit_tokens"] == 0
    print(f"\nserved TTFT: recompute {ttft[0] * 1e3:.0f} / {ttft[2] * 1e3:.0f} ms, CPU hit {ttft[1] * 1e3:.0f} ms; "
          f"modelled {model.recompute_s * 1e3:.0f} / {model.cpu_hit_s * 1e3:.0f} ms")
    assert min(ttft[0], ttft[2]) >= model.recompute_s * 0.99 and ttft[1] >= model.cpu_hit_s * 0.99
    lo, hi = VLLM_BLOG_FIG1_RANGE
    ratio = min(ttft[0], ttft[2]) / ttft[1]
    assert lo / (1 + TOL) <= ratio <= hi * (1 + TOL), f"served ratio x{ratio:.2f}"
