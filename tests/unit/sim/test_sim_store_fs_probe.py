"""The fs tier's existence check as vLLM 0.32 makes it: answered at the end of the engine step, then kept while a
request that asked is alive (vllm/v1/kv_offload/tiering/async_lookup.py; tests/e2e/test_e2e_sim_oracle.py holds the
simulator's replays against vLLM's own TieringOffloadingManager with it)."""

from __future__ import annotations

from pathlib import Path

from sim_unit_helpers import drive, make_cfg

from harness.sim.cache.probe import FsProbes
from harness.sim.scheduler import EngineCore


def test_a_probe_answers_at_the_end_of_the_step_and_its_answer_outlives_the_file_while_asked_for() -> None:
    on_disk = {1}
    probes = FsProbes(on_disk.__contains__)
    assert probes.ask("a", 1, 0.0) is None and probes.ask("a", 2, 0.0) is None  # RETRY: not yet known
    assert probes.end_step(0.0)
    assert probes.ask("b", 1, 1.0) is True and probes.ask("b", 2, 1.0) is False
    on_disk.discard(1)
    on_disk.add(2)
    assert probes.ask("c", 1, 2.0) is True and probes.ask("c", 2, 2.0) is False  # stale, as vLLM's cache
    for req in ("a", "b"):
        probes.release(req, at=2.0, now=2.0)
    probes.release("c", at=5.0, now=2.0)  # c's stores end at 5: its references stay until then
    assert probes.ask("d", 2, 3.0) is False
    probes.release("d", at=3.0, now=3.0)
    assert not probes.end_step(4.0) and len(probes) == 2
    assert probes.ask("e", 2, 5.0) is None and len(probes) == 1  # everyone who asked has gone: forgotten, asked anew
    assert probes.end_step(5.0) and probes.ask("e", 2, 6.0) is True


def test_a_tiered_lookup_that_reaches_the_disk_waits_one_engine_step(tmp_path: Path) -> None:
    core = EngineCore(make_cfg(64, cpu_chunks=16, fs_root=tmp_path, enable_prefix_caching=False))
    off = core.offload
    assert off is not None and off.probes is not None
    req = core.new_request("a", list(range(13)), 1, 0, 0.0)
    core.add(req)
    assert core.schedule(0.0) is None  # chunk 0 missed the CPU tier: the fs tier's answer comes after this step
    wake = core.next_wakeup()
    assert wake is not None and 0.0 < wake <= 0.01
    drive(core, wake)
    assert req.first_scheduled == wake and req.recomputed_tokens == 13 and off.probes.probes == 3
