"""The engine's cheap paths give what the plain computations give: memoised block hashes and text tokens, the
histogram family built from templates, the CPU tier's pinned share, the TensorRT-LLM collector's count."""

from __future__ import annotations

import random

import pytest
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString
from sim_unit_helpers import make_cfg

from harness.sim import blocks, tokenizer
from harness.sim.blocks import HashChain, chain_hashes, pack_tokens
from harness.sim.cache.cpu import INF, CpuTier
from harness.sim.histogram import FastHistogram
from harness.sim.memo import BoundedMemo
from harness.sim.metrics_trtllm import TrtllmMetrics
from harness.sim.scheduler import EngineCore
from harness.sim.tokenizer import render_chat, tokenize_text, word_id


def _plain_chain(tokens: list[int], block_size: int, root: int) -> list[int]:
    out: list[int] = []
    parent = root
    for i in range(len(tokens) // block_size):
        parent = blocks._block_hash(parent, tokens[i * block_size:(i + 1) * block_size])
        out.append(parent)
    return out


@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_chain_hashes_memo_matches_plain_hashing(block_size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(block_size)
    shared = [rnd.getrandbits(64) for _ in range(200)]
    for n in (0, 3, 16, 17, 250):
        tokens = shared[:n // 2] + [rnd.getrandbits(64) for _ in range(n - n // 2)]
        want = _plain_chain(tokens, block_size, 99)
        assert chain_hashes(tokens, block_size, 99) == want  # misses, then
        assert chain_hashes(tokens, block_size, 99, pack_tokens(tokens)) == want  # hits, with the packed bytes
        assert HashChain(tokens, block_size, 99).hashes == want
    monkeypatch.setattr(blocks, "_memo", BoundedMemo(64))  # a memo that starts afresh every few blocks
    assert chain_hashes(shared, block_size, 7) == _plain_chain(shared, block_size, 7)
    assert len(blocks._memo.data) * (8 * block_size + 8) <= 64 + 8 * block_size + 8


def test_tokenize_in_pieces_matches_splitting(monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(3)
    words = ["a", "bb", "c\u00a0d", "ünï", "x"]
    seps = [" ", "  ", "\n", " \t ", "\u2003", "\u3000"]
    base = "".join(rnd.choice(words) + rnd.choice(seps) for _ in range(3000))
    monkeypatch.setattr(tokenizer, "_pieces", BoundedMemo(5000))  # starts afresh during the loop too
    for cut in (0, 1, 10, 2047, 2048, 2049, 4097, 7000, len(base)):
        for tail in ("", " tail words", "tail", "\n"):
            text = base[:cut] + tail
            want = [word_id(w) for w in text.split()]
            assert tokenize_text(text) == want
            assert tokenize_text(" " + text) == want
    messages = [{"role": "system", "content": base}, {"role": "user", "content": base[:5000] + " why"}]
    want = [word_id("<|system|>"), *(word_id(w) for w in base.split()), word_id("<|user|>"),
            *(word_id(w) for w in (base[:5000] + " why").split()), word_id("<|assistant|>")]
    assert render_chat(messages) == want
    first = tokenize_text("short text")
    first.append(1)  # the caller's list is its own: the cache is not changed
    assert tokenize_text("short text") == [word_id("short"), word_id("text")]


def _plain_family(hist: FastHistogram, names: tuple[str, ...], values: tuple[str, ...]) -> HistogramMetricFamily:
    buckets: list[tuple[str, float]] = []
    acc = 0
    for bound, n in zip(hist.bounds, hist.counts, strict=False):
        acc += n
        buckets.append((floatToGoString(bound), float(acc)))
    buckets.append(("+Inf", float(acc + hist.counts[-1])))
    fam = HistogramMetricFamily(hist.name, hist.doc, labels=list(names))
    fam.add_metric(list(values), buckets, hist.total)
    fam.samples.append(Sample(hist.name + "_created", dict(zip(names, values, strict=True)), hist.created))
    return fam


def test_histogram_family_matches_add_metric() -> None:
    hist = FastHistogram("h_seconds", "doc", (0.001, 0.5, 1.0, 2.5e7))
    names, values = ("engine", "model_name"), ("0", "m")
    rnd = random.Random(5)
    for _ in range(40):
        for _ in range(rnd.randint(0, 3)):
            hist.observe(rnd.choice([0.0, 0.001, 0.5, 0.7, 1.0, 3e7, rnd.random()]))
        fam = hist.family(names, values)
        assert fam == _plain_family(hist, names, values)
        assert fam.samples == _plain_family(hist, names, values).samples
    assert hist.family(names, values) is fam  # nothing observed since: the same family
    hist.observe(0.2)
    assert hist.family(names, values) is not fam
    assert hist.family(("model_name",), ("x",)).samples == _plain_family(hist, ("model_name",), ("x",)).samples


def _plain_pinned(tier: CpuTier, now: float) -> float:
    tier.now = now
    return sum(1 for key in list(tier._ready_at) if not tier._evictable(key)) / tier.capacity


def test_pinned_share_matches_the_per_chunk_count() -> None:
    for trial in range(200):
        rnd = random.Random(trial)
        a, b = CpuTier(50), CpuTier(50)
        for key in range(rnd.randint(0, 50)):
            t = rnd.choice([INF, rnd.random() * 10])
            a._ready_at[key] = b._ready_at[key] = t
            if rnd.random() < 0.3:
                a._pins[key] = b._pins[key] = 1
            if rnd.random() < 0.5:
                a._held[key] = b._held[key] = rnd.random() * 10
        for key in range(60, 64):  # pins and holds of chunks no longer resident
            if rnd.random() < 0.5:
                a._held[key] = b._held[key] = rnd.random() * 10
            if rnd.random() < 0.5:
                a._pins[key] = b._pins[key] = 1
        now = rnd.random() * 10
        assert a.pinned_share(now) == _plain_pinned(b, now)
        assert a._held == b._held  # expired holds are dropped alike


def test_trtllm_background_collector_counts_every_entry() -> None:
    counts = []
    for collector in (True, False):
        core = EngineCore(make_cfg(20))
        metrics = TrtllmMetrics(core, "m", stats_collector=collector)
        now = 0.0
        for i in range(5):
            core.add(core.new_request(str(i), list(range(i, i + 12)), 2, i, now))
            while core.has_work():
                plan = core.schedule(now)
                assert plan is not None
                core.complete(plan)
                metrics.on_step(plan, core, 1.0)
                now = plan.end
        counts.append(metrics.collected + len(metrics.queue))
        assert (len(metrics.queue) == 0) is collector
    assert counts[0] == counts[1] > 0
