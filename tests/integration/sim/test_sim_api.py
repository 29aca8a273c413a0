"""The simulator over real sockets: OpenAI client, SSE format, metrics, tokenize, ground truth."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.sim.groundtruth import read_ground_truth
from tests.support.sim import SimHandle, running_sim

GOLDEN = Path(__file__).parents[2] / "unit" / "sim" / "golden" / "vllm-0.32.0-cpu-metrics.prom"


@pytest.fixture(scope="module")
def sim() -> Iterator[SimHandle]:
    with running_sim(profile="demo", time_scale=0.2, kv_offloading_size=4) as handle:
        yield handle


@pytest.fixture
def client(sim: SimHandle) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim.base_url + "/v1", api_key="unused", max_retries=0, timeout=30)


def _metric(base_url: str, name: str, **labels: str) -> float:
    text = httpx.get(base_url + "/metrics", timeout=10).text
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    raise KeyError(name)


def _sse_events(base_url: str, path: str, body: dict[str, object]) -> list[str]:
    events: list[str] = []
    with httpx.stream("POST", base_url + path, json=body, timeout=30) as resp:
        assert resp.status_code == 200
        assert resp.headers["x-harness-simulated"] == "1"
        assert resp.headers["content-type"].startswith("text/event-stream")
        buf = ""
        for chunk in resp.iter_text():
            buf += chunk
            while "\n\n" in buf:
                event, buf = buf.split("\n\n", 1)
                events.append(event)
        assert buf == ""
    return events


def test_models_and_health(sim: SimHandle) -> None:
    resp = httpx.get(sim.base_url + "/v1/models")
    assert resp.status_code == 200 and resp.headers["x-harness-simulated"] == "1"
    entry = resp.json()["data"][0]
    assert entry["id"] == "sim-model" and entry["owned_by"] == "harness-sim (SIMULATED)"
    assert httpx.get(sim.base_url + "/health").status_code == 200


def test_openai_client_streams_chat_and_completions(client: openai.OpenAI) -> None:
    words: list[str] = []
    usage = None
    ids = set()
    for chunk in client.chat.completions.create(
        model="sim-model", messages=[{"role": "user", "content": "hello there"}], max_tokens=7, stream=True,
        stream_options={"include_usage": True},
    ):
        ids.add(chunk.id)
        assert chunk.system_fingerprint == "harness-sim"
        if chunk.choices and chunk.choices[0].delta.content:
            words.append(chunk.choices[0].delta.content)
        if chunk.usage:
            usage = chunk.usage
    assert len(words) == 7 and len(ids) == 1 and ids.pop().startswith("chatcmpl-sim-")
    assert usage is not None and usage.completion_tokens == 7 and usage.prompt_tokens == 4
    assert usage.prompt_tokens_details is not None and usage.prompt_tokens_details.cached_tokens == 0

    texts = [c.choices[0].text for c in client.completions.create(
        model="sim-model", prompt="one two three", max_tokens=5, stream=True) if c.choices]
    assert len([t for t in texts if t]) == 5


def test_openai_client_non_streaming(client: openai.OpenAI) -> None:
    chat = client.chat.completions.create(model="sim-model", messages=[{"role": "user", "content": "a b c"}],
                                          max_tokens=4)
    assert chat.id.startswith("chatcmpl-sim-") and chat.system_fingerprint == "harness-sim"
    assert chat.choices[0].finish_reason == "length"
    assert len((chat.choices[0].message.content or "").split()) == 4
    assert chat.usage is not None and chat.usage.total_tokens == 5 + 4
    comp = client.completions.create(model="sim-model", prompt="a b c", max_tokens=3)
    assert comp.id.startswith("cmpl-sim-") and len(comp.choices[0].text.split()) == 3
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="other", prompt="x", max_tokens=1)
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model="sim-model", prompt="x", max_tokens=100_000)


def test_sse_format_is_vllm_like(sim: SimHandle) -> None:
    events = _sse_events(sim.base_url, "/v1/chat/completions", {
        "model": "sim-model", "messages": [{"role": "user", "content": "x y"}], "max_tokens": 3, "stream": True,
        "stream_options": {"include_usage": True}})
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    payloads = [json.loads(e[len("data: "):]) for e in events[:-1]]
    assert payloads[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    tokens = payloads[1:4]
    assert [p["choices"][0]["finish_reason"] for p in tokens] == [None, None, "length"]
    assert all(p["choices"][0]["delta"]["content"].startswith(" ") for p in tokens)
    assert payloads[4]["choices"] == [] and payloads[4]["usage"]["completion_tokens"] == 3
    events = _sse_events(sim.base_url, "/v1/completions", {
        "model": "sim-model", "prompt": "x y", "max_tokens": 2, "stream": True})
    assert len(events) == 3 and events[-1] == "data: [DONE]"
    assert json.loads(events[1][6:])["choices"][0]["finish_reason"] == "length"


def test_same_long_prompt_twice_hits_cache(sim: SimHandle, client: openai.OpenAI) -> None:
    prompt = " ".join(f"doc{i}" for i in range(2500))

    def once() -> tuple[float, int]:
        t0 = time.perf_counter()
        ttft = None
        cached = -1
        for chunk in client.completions.create(model="sim-model", prompt=prompt, max_tokens=2, stream=True,
                                               stream_options={"include_usage": True}):
            if ttft is None and chunk.choices and chunk.choices[0].text:
                ttft = time.perf_counter() - t0
            if chunk.usage and chunk.usage.prompt_tokens_details:
                cached = chunk.usage.prompt_tokens_details.cached_tokens or 0
        assert ttft is not None
        return ttft, cached

    hits0 = _metric(sim.base_url, "vllm:prefix_cache_hits_total")
    ttft1, cached1 = once()
    hits1 = _metric(sim.base_url, "vllm:prefix_cache_hits_total")
    ttft2, cached2 = once()
    hits2 = _metric(sim.base_url, "vllm:prefix_cache_hits_total")
    assert cached1 == 0 and hits1 == hits0
    assert cached2 == 2496  # (2500 - 1) // 16 blocks of 16
    assert hits2 - hits1 == cached2
    assert ttft2 < ttft1


def test_tokenize(sim: SimHandle) -> None:
    r = httpx.post(sim.base_url + "/tokenize", json={"prompt": "a b c"}).json()
    assert r["count"] == 3 and len(r["tokens"]) == 3 and r["max_model_len"] == 8192
    r2 = httpx.post(sim.base_url + "/tokenize", json={"messages": [{"role": "user", "content": "a b c"}]}).json()
    assert r2["count"] == 5 and r2["tokens"][1:4] == r["tokens"]
    assert httpx.post(sim.base_url + "/tokenize", json={}).status_code == 400


def test_metrics_valid_and_match_golden(sim: SimHandle) -> None:
    resp = httpx.get(sim.base_url + "/metrics")
    assert resp.headers["content-type"].startswith("text/plain")
    ours = {f.name: f.type for f in text_string_to_metric_families(resp.text)}
    golden = {f.name: f.type for f in text_string_to_metric_families(GOLDEN.read_text())}
    for name in ("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                 "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds", "vllm:num_requests_running",
                 "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:num_preemptions",
                 "vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:external_prefix_cache_queries",
                 "vllm:external_prefix_cache_hits", "vllm:prompt_tokens_by_source",
                 "vllm:prompt_tokens_cached_by_source", "vllm:cache_config_info"):
        assert ours[name] == golden[name], name
    assert ours["vllm:kv_offload_store_bytes"] == "counter"


def test_ground_truth_matches_client(sim: SimHandle, client: openai.OpenAI) -> None:
    t_send = time.perf_counter_ns()
    first = None
    rid = None
    for chunk in client.chat.completions.create(model="sim-model", messages=[{"role": "user", "content": "gt"}],
                                                max_tokens=3, stream=True):
        rid = chunk.id
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter_ns()
    assert sim.ground_truth_path is not None and first is not None
    deadline = time.monotonic() + 5
    rec = None
    while rec is None and time.monotonic() < deadline:
        rec = next((r for r in read_ground_truth(sim.ground_truth_path) if r["request_id"] == rid), None)
        time.sleep(0.02)
    assert rec is not None and rec["status"] == "ok" and rec["output_tokens"] == 3
    assert rec["gpu_hit_tokens"] + rec["cpu_hit_tokens"] + rec["disk_hit_tokens"] + rec["recomputed_tokens"] == \
        rec["prompt_tokens"] == 3
    assert t_send <= rec["arrival_ns"] <= rec["first_token_sent_ns"] <= first
    assert rec["first_token_sent_ns"] <= rec["finished_ns"]
    assert abs(rec["first_token_sent_wall_ns"] - time.time_ns()) < 60e9


def test_admin_state_and_faults(sim: SimHandle) -> None:
    state = httpx.get(sim.base_url + "/admin/state").json()
    assert state["simulated"] is True and state["gpu"]["num_blocks"] == 558 and state["cpu"] is not None
    r = httpx.post(sim.base_url + "/admin/faults", json={"error_rate": 1.0})
    assert r.status_code == 200 and r.json()["error_rate"] == 1.0
    try:
        resp = httpx.post(sim.base_url + "/v1/completions", json={"model": "sim-model", "prompt": "x", "max_tokens": 1})
        assert resp.status_code == 500 and "error" in resp.json()
    finally:
        httpx.post(sim.base_url + "/admin/faults", json={"error_rate": 0})
    assert httpx.post(sim.base_url + "/admin/faults", json={"nope": 1}).status_code == 400
    assert httpx.post(sim.base_url + "/admin/cache-loss").json()["deleted_files"] == 0
