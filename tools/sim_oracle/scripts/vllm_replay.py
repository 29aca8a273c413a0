# mypy: ignore-errors
"""Runs INSIDE vLLM's Python (a vLLM 0.32 venv), never in the harness: replays request sequences through vLLM's own
offload managers and prints one ``KVH-ORACLE {json}`` line per run (``KVH-ORACLE-ERROR {json}`` if one failed).

Input (stdin, JSON): ``{"sequences": [...], "runs": [{"sequence": NAME, "config": {...}}], "scratch": DIR}`` as
built by ``tools.sim_oracle`` (sequence.py, replay.py). Each run builds its manager through vLLM's own
``OffloadingSpecFactory`` (``CPUOffloadingSpec``: ``CPUOffloadingManager`` with lru/arc and ``store_threshold``;
``TieringOffloadingSpec``: ``TieringOffloadingManager`` over a CPU primary tier and one fs tier under DIR), one
4 KiB chunk per offloaded block, and drives it the way ``OffloadingConnectorScheduler`` does, on the step clock
of ``tools/sim_oracle/replay.py``: ``on_new_request`` at arrival (every key's position set), a lookup per chunk
from the GPU hit until a miss (HIT_PENDING and RETRY defer the request; a hit chunk being loaded defers it),
``prepare_load`` of the hit, ``complete_load`` a step later, ``prepare_store`` of the computed chunks not yet
stored (offered again after an allocation failure), ``complete_store`` two steps later (where tiering cascades to
the fs tier), ``on_request_finished``, ``on_schedule_end`` at the end of every step. The fs tier's jobs and its
asynchronous existence probes (a first lookup answers RETRY) are waited for at the end of every step (a fast disk),
their completions taken at the start of the next.
Standard library and vLLM only: this file is sent to the interpreter as text.
"""

import collections
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
import uuid

MARK = "KVH-ORACLE "
PAGE = 4096
IDLE_STEPS = 3


def say(tag, item):
    print(tag + json.dumps(item), flush=True)


def build(cfg, seq, root):
    from vllm.v1.kv_offload.config import (
        OffloadingCacheConfig,
        OffloadingConfig,
        OffloadingGroupConfig,
        OffloadingModelConfig,
        OffloadingParallelConfig,
    )
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory

    k = seq["blocks_per_chunk"]
    extra = {"spec_name": "TieringOffloadingSpec" if cfg["tiered"] else "CPUOffloadingSpec",
             "cpu_bytes_to_use": cfg["capacity_chunks"] * PAGE * k, "eviction_policy": cfg["policy"],
             "offload_prompt_only": cfg["offload_prompt_only"]}
    if cfg["store_threshold"]:
        extra["store_threshold"] = cfg["store_threshold"]
    if cfg["tiered"]:
        extra["secondary_tiers"] = [{"type": "fs", "root_dir": root}]
    config = OffloadingConfig(
        groups=(OffloadingGroupConfig(seq["block_tokens"], ("model.layers.0.self_attn.attn",), 0),),
        worker_kv_bytes_per_block=PAGE, enable_kv_cache_events=False, extra_config=extra,
        engine_id=f"kvh-oracle-{uuid.uuid4().hex}", model=OffloadingModelConfig("kvh-oracle", "bfloat16"),
        cache=OffloadingCacheConfig(seq["block_tokens"], k),
        parallel=OffloadingParallelConfig(0, 1, 1, 1, 1, 1, 0, 1, None, True))
    return OffloadingSpecFactory.create_spec(config).get_manager()


class Req:
    def __init__(self, spec, tpc, make_key, context):
        self.spec = spec
        self.keys = [make_key(c) for c in spec["chunks"]]
        self.ctx = context(spec["id"])
        for i, key in enumerate(self.keys):
            self.ctx.set_offload_key_position(key, (i + 1) * tpc)
        self.out = {"id": spec["id"], "step": -1, "defers": 0, "aborted": False, "hit": [], "hit_disk": [],
                    "stored": [], "evicted": [], "promoted": [], "cascaded": [], "alloc_failures": 0,
                    "promote_failures": 0}
        self.state = "waiting"
        self.next_chunk = 0
        self.load_keys = []


def run(seq, cfg, scratch):
    from vllm.v1.kv_offload.base import (
        LookupResult,
        ReqContext,
        ScheduleEndContext,
        get_offload_block_hash,
        make_offload_key,
    )
    from vllm.v1.metrics.cache_hit_source import CacheHitSource

    root = tempfile.mkdtemp(prefix="fs-", dir=scratch)
    m = build(cfg, seq, root)
    k, bs = seq["blocks_per_chunk"], seq["block_tokens"]
    tpc = bs * k

    def key_of(i):
        return make_offload_key(int(i).to_bytes(8, "big"), 0)

    def int_of(key):
        return int.from_bytes(get_offload_block_hash(key), "big")

    reqs = {s["id"]: Req(s, tpc, key_of, ReqContext) for s in seq["requests"]}
    tiered = hasattr(m, "secondary_tiers")
    primary = m.primary_tier if tiered else m
    fs = m.secondary_tiers[0] if tiered else None
    if tiered:
        prepare_write, submit_store = primary.prepare_write, fs.submit_store

        def promote(keys, ctx):
            out = prepare_write(keys, ctx)
            rec = reqs[ctx.req_id].out
            if out is None:
                rec["promote_failures"] += len(keys)
            else:
                rec["evicted"] += [int_of(x) for x in out.evicted_keys]
                rec["promoted"] += [int_of(x) for x in out.keys_to_store]
            return out

        def cascade(job):
            reqs[job.req_context.req_id].out["cascaded"] += [int_of(x) for x in job.keys]
            return submit_store(job)

        primary.prepare_write, fs.submit_store = promote, cascade

    lm = fs._lookup_manager if tiered else None

    def probes_answered():
        """Wait for the fs tier's probes sent at this step's end (vLLM's worker thread answers them)."""
        deadline = time.monotonic() + 30
        while any(s.phase.name == "IN_FLIGHT" for s in lm._lookup_state.values()):
            if time.monotonic() > deadline:
                raise TimeoutError("fs tier lookups did not resolve")
            time.sleep(0.0001)
            lm.drain_results()

    being_loaded = collections.Counter()
    counters = {"lookups": 0}

    def lookup(r):
        """The connector's _lookup_complete_chunks for one full-attention group: chunk keys, None (defer), []."""
        keys = r.keys[: r.spec["prompt_chunks"]]
        computed = r.spec["gpu_blocks"] * bs
        max_hit = len(keys) * tpc
        if max_hit - computed < tpc:
            return []
        start = computed // tpc
        hits, defer = 0, False
        for key in keys[start:]:
            counters["lookups"] += 1
            result = m.lookup(key, r.ctx)
            if result is LookupResult.HIT:
                hits += 1
            elif result is LookupResult.HIT_PENDING:
                defer, hits = True, hits + 1
            elif result is LookupResult.RETRY:
                defer = True
            else:
                break
        if defer:
            return None
        if hits == 0 or (start + hits) * tpc - computed < tpc:
            return []
        found = keys[start:start + hits]
        if any(being_loaded[key] for key in found):
            return None
        return found

    stores_due = collections.defaultdict(list)
    loads_due = collections.defaultdict(list)

    def offer(r, upto, t):
        if upto <= r.next_chunk:
            return
        out = m.prepare_store(r.keys[r.next_chunk:upto], r.ctx)
        if out is None:
            r.out["alloc_failures"] += 1
            return
        r.out["evicted"] += [int_of(x) for x in out.evicted_keys]
        r.out["stored"] += [int_of(x) for x in out.keys_to_store]
        if out.keys_to_store:
            stores_due[t + 2].append((r, list(out.keys_to_store)))
        r.next_chunk = upto

    arrivals = collections.deque(reqs.values())
    waiting, finishing = [], []
    t, idle = 0, 0
    while idle < IDLE_STEPS:
        if tiered:
            m._maybe_process_finished_jobs()
        for r in loads_due.pop(t, []):
            m.complete_load(r.load_keys, r.ctx)
            being_loaded.subtract(r.load_keys)
            r.state = "loaded"
        for r, keys in stores_due.pop(t, []):
            m.complete_store(keys, r.ctx)
        for _ in range(min(cfg["arrivals_per_step"], len(arrivals))):
            r = arrivals.popleft()
            m.on_new_request(r.ctx)
            waiting.append(r)
        scheduled, aborted, still = [], [], []
        for r in waiting:
            if r.state == "loading":
                still.append(r)
                continue
            if r.state == "loaded":
                scheduled.append(r)
                continue
            found = lookup(r)
            if found is None:
                r.out["defers"] += 1
                if r.out["defers"] > cfg["max_defers"]:
                    r.out["aborted"] = True
                    aborted.append(r)
                else:
                    still.append(r)
                continue
            r.out["step"] = t
            if found:
                r.out["hit"] = [int_of(x) for x in found]
                r.out["hit_disk"] = [int_of(x) for x in found
                                     if m.get_load_source(x, r.ctx) == CacheHitSource.DISK]
                start = r.spec["gpu_blocks"] // k
                r.next_chunk = start + len(found)
                m.prepare_load(found, r.ctx)
                being_loaded.update(found)
                r.load_keys, r.state = found, "loading"
                loads_due[t + 1].append(r)
                still.append(r)
            else:
                scheduled.append(r)
        waiting = still
        for r in scheduled:
            offer(r, r.spec["prompt_chunks"], t)
        for r in finishing:
            offer(r, r.spec["prompt_chunks"] if cfg["offload_prompt_only"] else len(r.keys), t)
        for r in (*finishing, *aborted):
            m.on_request_finished(r.ctx)
        finishing = scheduled
        if fs is not None:
            fs.drain_jobs()  # cascades done before the step's probes look at the files
        m.on_schedule_end(ScheduleEndContext((), ()))
        if fs is not None:
            fs.drain_jobs()  # promotions done
            probes_answered()
        busy = arrivals or waiting or finishing
        idle = 0 if busy else idle + 1
        t += 1
    final = {"fs": sorted(int(name[:-4], 16) for _d, _s, files in os.walk(root) for name in files
                          if name.endswith(".bin"))}
    policy = primary._policy
    if cfg["policy"] == "lru":
        final["lru"] = [int_of(x) for x in sorted(policy.chunks, key=policy._ranks.__getitem__)]
    else:
        final["arc"] = {"t1": [int_of(x) for x in policy.t1], "t2": [int_of(x) for x in policy.t2],
                        "b1": [int_of(x) for x in policy.b1], "b2": [int_of(x) for x in policy.b2],
                        "target": float(policy.target_t1_size)}
    m.shutdown()
    shutil.rmtree(root, ignore_errors=True)
    return {"sequence": seq["name"], "config": cfg["name"], "outcomes": [r.out for r in reqs.values()],
            "final": final, "lookups": counters["lookups"], "steps": t}


def main():
    request = json.load(sys.stdin)
    sequences = {s["name"]: s for s in request["sequences"]}
    scratch = request.get("scratch") or tempfile.mkdtemp(prefix="kvh-oracle-")
    for item in request["runs"]:
        seq, cfg = sequences[item["sequence"]], item["config"]
        try:
            say(MARK, run(seq, cfg, scratch))
        except Exception as exc:
            say("KVH-ORACLE-ERROR ", {"sequence": seq["name"], "config": cfg["name"],
                                      "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()})


if __name__ == "__main__":
    main()
