"""The in-process engine is the simulator's: the same flags, tokens, timings and metrics as ``harness sim serve``."""

from __future__ import annotations

from pathlib import Path

import pytest
from virtual_unit_helpers import demo_scenario, start

from harness.sim.api import ApiError, parse_request
from harness.sim.calibration import advance
from harness.sim.cli import resolve_serve
from harness.sim.request import SimRequest
from harness.sim.scheduler import EngineCore
from harness.sim.tokenizer import output_seed, render_chat
from harness.virtual.engine import EngineStartError, VirtualEngine, serve_params
from harness.virtual.world import VirtualWorld
from harness.workload.tokens import calibrate_tokenizer

MESSAGES = [{"role": "system", "content": "you are a terse assistant " * 40},
            {"role": "user", "content": "name three prime numbers please"}]


class _Listener:
    def __init__(self, at: int) -> None:
        self.arrival_ns = at
        self.first_token_ns: int | None = None
        self.last_token_ns: int | None = None
        self.tokens: list[int] = []
        self.done = False

    def token(self, now_ns: int) -> None:
        self.tokens.append(now_ns)

    def ended(self, req: SimRequest) -> None:
        self.done = True


def test_same_config_as_the_served_simulator(tmp_path: Path) -> None:
    scenario = demo_scenario(tmp_path / "tier")
    _url, engine = start(VirtualWorld.begin(), scenario, 2)
    _opts, served_cfg, banner = resolve_serve(serve_params(list(engine.spec.args)))
    assert engine.cfg == served_cfg and engine.banner == banner
    assert engine.core.offload is not None and engine.core.offload.fs is not None
    assert not (tmp_path / "tier").exists()  # the configured disk-tier directory is never touched


def test_a_request_takes_the_modelled_time_of_the_fake_clock_driver(tmp_path: Path) -> None:
    """The same request on an identically configured core driven by harness.sim.calibration's fake clock gets its
    tokens at the same modelled times."""
    world = VirtualWorld.begin()
    _url, engine = start(world, demo_scenario(tmp_path), 0)
    body = {"model": "demo-8b", "messages": MESSAGES, "max_tokens": 5, "stream": True}
    listener = _Listener(world.clock.mono_ns())
    req = engine.submit(body, "chat", listener)
    world.queue.run_until(lambda: listener.done)

    core = EngineCore(engine.cfg)
    parsed = parse_request(body, "chat", engine.opts.served_names, engine.cfg.max_model_len)
    assert parsed.prompt_ids == render_chat(MESSAGES)
    ref = core.new_request("r", parsed.prompt_ids, 5, output_seed(engine.opts.seed, None, parsed.prompt_ids), 0.0)
    assert ref.chain.hashes == req.chain.hashes  # the same prompt tokens and block hashes as over HTTP
    core.add(ref)
    now, times = 0.0, []
    while core.has_work():
        before = len(ref.output_idx)
        now = advance(core, now)
        if len(ref.output_idx) > before:
            times.append(now)
    assert [engine.ns_at(t) for t in times] == listener.tokens
    assert ref.output_idx == req.output_idx
    assert listener.first_token_ns == listener.tokens[0]


def test_tokenize_and_the_calibration_match_the_server_rules(tmp_path: Path) -> None:
    world = VirtualWorld.begin()
    url, engine = start(world, demo_scenario(tmp_path), 0)
    status, answer = engine.tokenize({"messages": MESSAGES})
    assert status == 200 and answer["tokens"] == render_chat(MESSAGES) and answer["max_model_len"] == 8192
    assert engine.tokenize({"nothing": 1})[0] == 400

    def post(path: str, body: dict[str, object]) -> object:
        code, data = engine.tokenize(body)
        assert path.endswith("/tokenize") and code == 200
        return data

    calib = calibrate_tokenizer(url, "demo-8b", post=post)
    assert (calib.method, calib.tokens_per_word, calib.chat_overhead, calib.chat_message_overhead,
            calib.completion_overhead, calib.max_model_len) == ("tokenize", 1.0, 2, 1, 0, 8192)


def test_a_refused_request_and_a_refused_start(tmp_path: Path) -> None:
    world = VirtualWorld.begin()
    _url, engine = start(world, demo_scenario(tmp_path), 0)
    with pytest.raises(ApiError) as err:
        engine.submit({"model": "demo-8b", "messages": MESSAGES, "max_tokens": 9000}, "chat",
                      _Listener(world.clock.mono_ns()))
    assert err.value.status == 400 and "maximum context length" in err.value.message
    spec = engine.spec.model_copy(update={"args": [*engine.spec.args, "--fail-start", "no GPU (injected)"]})
    with pytest.raises(EngineStartError, match="no GPU"):
        VirtualEngine(spec, world.queue, world.disk, "00000000")


def test_metrics_are_the_vllm_exposition_and_the_engine_stops(tmp_path: Path) -> None:
    world = VirtualWorld.begin()
    _url, engine = start(world, demo_scenario(tmp_path), 1)
    status, text = engine.exposition("/metrics")
    assert status == 200 and "vllm:prefix_cache_queries_total" in text and "vllm:kv_offload_load_bytes" in text
    assert engine.exposition("/prometheus/metrics")[0] == 404
    code, answer = engine.complete_now({"model": "demo-8b", "prompt": "a b c d e f g", "max_tokens": 2}, "completion",
                                       10.0)
    assert code == 200 and answer["usage"]["completion_tokens"] == 2 and answer["id"].startswith("cmpl-sim-")
    listener = _Listener(world.clock.mono_ns())
    engine.submit({"model": "demo-8b", "prompt": "a b c d e f g h", "max_tokens": 3}, "completion", listener)
    engine.stop()  # a stopped engine's queued steps do nothing: the request never ends
    assert not engine.alive and engine.exposition("/metrics")[0] == 200
    assert not world.queue.run_until(lambda: listener.done) and listener.tokens == []
