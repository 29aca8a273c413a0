"""The engine model: continuous batching over a paged KV cache with offload tiers (pure; fake-clock testable).

One engine step at modelled time ``t`` (vLLM v1's scheduler, simplified):

1. Requests whose promotion (load from CPU/disk) has ended join the running list.
2. Running requests, oldest first, get tokens within the step budget ``max_num_batched_tokens``: a decoding
   request 1 token, a prefilling one ``min(remaining, budget)`` (chunked prefill). When a request needs a block
   and none is free, the newest running request is preempted (its blocks are freed -- they stay in the prefix
   cache until evicted -- and it is recomputed later); preemptions are counted.
3. If nothing was preempted, waiting requests are admitted in arrival order while fewer than ``max_num_seqs``
   are active. Admission finds the longest cached prefix: GPU blocks first (free), then the offload tiers
   (:mod:`harness.sim.offload`). A request with an external hit waits for its promotion (it holds its blocks,
   uses no step budget) and then computes the rest; otherwise its first prefill chunk joins this step. A request
   that cannot get its blocks stops admission (FCFS). GPU hits are capped at ``(n - 1) // block_size`` blocks so
   the last prompt token is always computed; an external hit may cover every full chunk, and then the last token
   is recomputed after the load (both as vLLM). A request whose chunks are still being stored or promoted is
   deferred (tried again at a later step).

Step time (modelled seconds), summed over the batch::

    T = step_overhead_s
      + sum over prefill chunks of n new tokens after c cached/computed tokens:
            n * prefill_s_per_token + prefill_s_per_token_ctx * (n * c + n * (n - 1) / 2)
      + sum over decoding sequences with context c:
            decode_s_per_seq + decode_s_per_ctx_token * c

With noise on (:mod:`harness.sim.noise`, off by default) ``T`` is multiplied by the run's drift and the
step's jitter factor. With offload-on-eviction stores the step also waits for the D2H copies its allocations
caused. At the end of a step each request that has computed all its tokens samples one output token (streamed
at once); a request with ``max_tokens`` tokens finishes and releases its blocks (after its pending write-through
stores end). Write-through stores are offered every step for the request's computed full chunks not yet stored
(up to the prompt with ``offload_prompt_only``), so an allocation failure is retried; a request that finishes or
is aborted ends its offload accesses (:meth:`OffloadManager.finish_request`).

Attribution, fixed at a request's first admission: ``gpu_hit + cpu_hit + disk_hit + recomputed == prompt``
(tokens). Counters follow vLLM: ``prefix_cache_queries/hits`` (GPU) and ``external_prefix_cache_queries/hits``
(CPU + disk, only with a tier) at admission; ``prompt_tokens`` and ``prompt_tokens_by_source`` at the first
token. Re-admissions after preemption do not count again.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

from harness.sim.blocks import root_hash
from harness.sim.cache.gpu import GpuBlockPool
from harness.sim.config import EngineConfig
from harness.sim.noise import Noise
from harness.sim.offload import DEFER, ExternalHit, OffloadManager
from harness.sim.request import ReqState, SimRequest


@dataclass
class CoreStats:
    """Cumulative counters of the engine model (tokens unless named otherwise)."""

    prefix_queries: int = 0
    prefix_hits: int = 0
    external_queries: int = 0
    external_hits: int = 0
    cached_device: int = 0
    cached_host: int = 0
    cached_disk: int = 0
    prompt_tokens: int = 0
    src_local_compute: int = 0
    src_local_cache_hit: int = 0
    src_external: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    finished: dict[str, int] = field(default_factory=lambda: {"length": 0, "abort": 0})
    steps: int = 0
    busy_s: float = 0.0
    reused_blocks: int = 0
    missed_blocks: int = 0
    alloc_new_blocks: int = 0


@dataclass
class StepPlan:
    """One scheduled step: requests with their token counts, and when it runs (modelled seconds)."""

    start: float
    duration: float
    items: list[tuple[SimRequest, int]]
    num_tokens: int

    @property
    def end(self) -> float:
        return self.start + self.duration


@dataclass
class StepResult:
    emitted: list[SimRequest]
    finished: list[SimRequest]


def namespace_of(model_name: str, block_size: int) -> int:
    """Hash-chain root: block hashes are valid only for the same model and block size."""
    return root_hash(f"harness-sim|{model_name}|{block_size}")


class EngineCore:
    """Scheduler, GPU pool and offload tiers; driven by :meth:`schedule` / :meth:`complete`."""

    def __init__(self, cfg: EngineConfig) -> None:
        self.cfg = cfg
        self.bs = cfg.block_size
        self.root = namespace_of(cfg.model_name, cfg.block_size)
        self.noise: Noise | None = Noise(cfg.noise) if cfg.noise.on else None
        self.offload: OffloadManager | None = None
        if cfg.offload is not None:
            self.offload = OffloadManager(cfg, cfg.offload, self.root)
            if self.noise is not None and self.offload.disk_read is not None and cfg.noise.disk_tail_on:
                self.offload.disk_read.extra = self.noise.disk_read_factor
        on_evict = None
        if self.offload is not None and not self.offload.write_through:
            on_evict = self.offload.store_evicted
        self.pool = GpuBlockPool(cfg.num_gpu_blocks, cfg.enable_prefix_caching, on_evict)
        self.waiting: deque[SimRequest] = deque()
        self.loading: list[SimRequest] = []
        self.running: list[SimRequest] = []
        self.stats = CoreStats()
        self._deferred: list[tuple[float, int, list[int]]] = []
        self._seq = 0

    # ------------------------------------------------------------------ requests in and out

    def new_request(
        self, request_id: str, prompt_ids: list[int], max_tokens: int, output_seed: int, now: float,
        packed: bytes | None = None,
    ) -> SimRequest:
        """A request (not yet queued); ``packed`` is :func:`harness.sim.blocks.pack_tokens` of ``prompt_ids``."""
        if len(prompt_ids) + max_tokens > self.cfg.max_model_len:
            raise ValueError(f"prompt + max_tokens exceeds max_model_len {self.cfg.max_model_len}")
        return SimRequest(request_id, prompt_ids, max_tokens, output_seed, now, self.root, self.bs, packed)

    def add(self, req: SimRequest) -> None:
        self.waiting.append(req)

    def abort(self, req: SimRequest, now: float) -> None:
        """The client went away: drop the request and free what it holds."""
        state = req.state
        if state in (ReqState.FINISHED, ReqState.ABORTED):
            return
        req.state = ReqState.ABORTED
        req.finish_reason = "abort"
        req.finished_at = now
        self.stats.finished["abort"] += 1
        if state == ReqState.WAITING:
            self.waiting.remove(req)
        elif state == ReqState.RUNNING:
            self.running.remove(req)
            if self.offload is not None and self.offload.write_through:
                self._store_new(req, self.offload, now)  # vLLM's last offer for an aborted request
            self._release(req, now)
        # LOADING: released when the load ends (see _collect_loaded)
        if self.offload is not None:
            self.offload.finish_request(req.request_id)

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting) + len(self.loading)

    def has_work(self) -> bool:
        return bool(self.running or self.waiting or self.loading)

    def next_wakeup(self) -> float | None:
        """Earliest time something changes without a new arrival (a load or a deferred release ends)."""
        times = [r.load.ready_at for r in self.loading if r.load is not None]
        if self._deferred:
            times.append(self._deferred[0][0])
        if self.offload is not None and (t := self.offload.next_event()) is not None:
            times.append(t)
        return min(times) if times else None

    def reset_prefix_cache(self, now: float, reset_external: bool = False) -> bool:
        """vLLM 0.32's ``Scheduler.reset_prefix_cache`` without preempting running requests: the GPU prefix cache
        is forgotten unless a block is still held (a running request, a store in flight), and with
        ``reset_external`` the offload tiers are reset too (:meth:`OffloadManager.reset_cache`), whatever the GPU
        side did; True only when both succeeded. The counters are not touched (vLLM's only grow)."""
        while self._deferred and self._deferred[0][0] <= now:  # stores that ended release their blocks first
            _t, _s, blocks = heapq.heappop(self._deferred)
            self.pool.release(blocks)
        ok = self.pool.reset_prefix_cache()
        if reset_external and self.offload is not None:
            ok = self.offload.reset_cache() and ok
        return ok

    # ------------------------------------------------------------------ scheduling

    def _release(self, req: SimRequest, now: float) -> None:
        if req.load is not None and self.offload is not None:
            self.offload.finish_load(req.load)
            req.load = None
        if not req.blocks:
            return
        if req.store_ready_at > now:
            self._seq += 1
            heapq.heappush(self._deferred, (req.store_ready_at, self._seq, req.blocks))
        else:
            self.pool.release(req.blocks)
        req.blocks = []

    def _collect(self, now: float) -> None:
        while self._deferred and self._deferred[0][0] <= now:
            _t, _s, blocks = heapq.heappop(self._deferred)
            self.pool.release(blocks)
        if not self.loading:
            return
        still: list[SimRequest] = []
        for req in self.loading:
            load = req.load
            assert load is not None
            if load.ready_at > now:
                still.append(req)
                continue
            if req.state == ReqState.ABORTED:
                self._release(req, now)
                continue
            assert self.offload is not None
            self.offload.finish_load(load)
            req.load = None
            end = load.start_block + load.n_blocks
            hashes = req.chain.hashes
            for j in range(req.num_registered, end):
                self.pool.register(req.blocks[j], hashes[j])
            req.num_registered = end
            req.num_computed = min(end * self.bs, req.num_tokens - 1)  # a whole-prompt hit recomputes the last token
            if self.offload.write_through:
                req.num_stored_chunks = max(req.num_stored_chunks, end // self.offload.k)
            req.state = ReqState.RUNNING
            self.running.append(req)
        self.loading = still

    def _preempt_last(self, now: float) -> SimRequest:
        victim = self.running.pop()
        self._release(victim, now)
        victim.num_computed = 0
        victim.num_registered = 0
        victim.state = ReqState.WAITING
        victim.preemptions += 1
        self.stats.preemptions += 1
        self.waiting.appendleft(victim)
        return victim

    def _attribute(self, req: SimRequest, g: int, hit: ExternalHit | None) -> None:
        bs = self.bs
        st = self.stats
        req.attributed = True
        req.gpu_hit_tokens = g * bs
        if hit is not None:
            req.cpu_hit_tokens = hit.cpu_blocks * bs
            req.disk_hit_tokens = hit.disk_blocks * bs
        req.recomputed_tokens = req.prompt_len - req.cached_tokens
        st.prefix_queries += req.prompt_len
        st.prefix_hits += req.gpu_hit_tokens
        st.cached_device += req.gpu_hit_tokens
        if self.offload is not None:
            st.external_queries += req.prompt_len
            st.external_hits += req.cpu_hit_tokens + req.disk_hit_tokens
            st.cached_host += req.cpu_hit_tokens
            st.cached_disk += req.disk_hit_tokens
        reused = req.cached_tokens // bs
        st.reused_blocks += reused
        st.missed_blocks += -(-req.prompt_len // bs) - reused

    def _try_admit(self, req: SimRequest, now: float, budget: int) -> int | str:
        """Admit ``req``: tokens scheduled now (0 if it is loading), ``DEFER`` to skip it, ``"blocked"``."""
        bs = self.bs
        pool = self.pool
        max_hit = (req.num_tokens - 1) // bs
        hashes = req.chain.hashes
        gpu_bids = pool.lookup_prefix(hashes, max_hit)
        g = len(gpu_bids)
        hit: ExternalHit | None = None
        if self.offload is not None:
            max_ext = len(hashes) if self.offload.write_through else max_hit
            found = self.offload.lookup(req.request_id, hashes, g, max_ext, now)
            if found == DEFER:
                return DEFER
            if isinstance(found, ExternalHit):
                hit = found
        ext = hit.n_blocks if hit is not None else 0
        hit_tokens = (g + ext) * bs
        if ext:
            n_sched = 0
            need = ext
        else:
            n_sched = min(req.num_tokens - hit_tokens, budget)
            need = -(-(hit_tokens + n_sched) // bs) - g
        if need + pool.count_evictable(gpu_bids) > pool.num_free:
            return "blocked"
        if self.offload is not None:
            self.offload.now = now
        pool.acquire(gpu_bids)
        new = pool.allocate(need)
        assert new is not None
        self.stats.alloc_new_blocks += len(new)
        req.blocks = gpu_bids + new
        req.num_registered = g
        req.num_computed = g * bs
        if not req.attributed:
            self._attribute(req, g, hit)
        if hit is not None:
            assert self.offload is not None
            req.load = hit
            self.offload.start_load(hit, now)
            req.state = ReqState.LOADING
            self.loading.append(req)
            return 0
        if self.offload is not None:
            self.offload.admitted(req.request_id)
        req.state = ReqState.RUNNING
        self.running.append(req)
        return n_sched

    def schedule(self, now: float) -> StepPlan | None:
        """Plan the step starting at ``now``; ``None`` when nothing can run now."""
        self._collect(now)
        if self.offload is not None:
            self.offload.now = now
            self.offload.evict_store_end = 0.0
        bs = self.bs
        pool = self.pool
        budget = self.cfg.max_num_batched_tokens
        items: list[tuple[SimRequest, int]] = []
        preempted = False
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            n = min(req.num_tokens - req.num_computed, budget)
            need = -(-(req.num_computed + n) // bs) - len(req.blocks)
            while need > 0:
                new = pool.allocate(need)
                if new is not None:
                    self.stats.alloc_new_blocks += len(new)
                    req.blocks.extend(new)
                    break
                victim = self._preempt_last(now)
                preempted = True
                if victim is req:
                    break
            if req.state != ReqState.RUNNING:
                break
            items.append((req, n))
            budget -= n
            i += 1
        if not preempted:
            skipped: list[SimRequest] = []
            while self.waiting and budget > 0 and len(self.running) + len(self.loading) < self.cfg.max_num_seqs:
                req = self.waiting.popleft()
                outcome = self._try_admit(req, now, budget)
                if outcome == DEFER:
                    skipped.append(req)
                    continue
                if outcome == "blocked":
                    self.waiting.appendleft(req)
                    break
                assert isinstance(outcome, int)
                if outcome > 0:
                    items.append((req, outcome))
                    budget -= outcome
            self.waiting.extendleft(reversed(skipped))
        if self.offload is not None:
            self.offload.end_step(now)
        if not items:
            return None
        duration = self._step_time(items)
        if self.noise is not None and self.noise.spec.compute_on:
            duration *= self.noise.compute_factor(now)
        if self.offload is not None and self.offload.evict_store_end > now + duration:
            duration = self.offload.evict_store_end - now
        for req, _n in items:
            if req.first_scheduled is None:
                req.first_scheduled = now
        return StepPlan(now, duration, items, self.cfg.max_num_batched_tokens - budget)

    def _step_time(self, items: list[tuple[SimRequest, int]]) -> float:
        c = self.cfg.compute
        t = c.step_overhead_s
        for req, n in items:
            ctx = req.num_computed
            if n == 1 and req.output_idx and ctx == req.num_tokens - 1:
                t += c.decode_s_per_seq + c.decode_s_per_ctx_token * ctx
            else:
                t += n * c.prefill_s_per_token + c.prefill_s_per_token_ctx * (n * ctx + n * (n - 1) / 2)
        return t

    # ------------------------------------------------------------------ step completion

    def complete(self, plan: StepPlan) -> StepResult:
        """Apply a planned step at its end time: computed tokens, new cached blocks, stores, samples."""
        end = plan.end
        bs = self.bs
        pool = self.pool
        off = self.offload
        st = self.stats
        st.steps += 1
        st.busy_s += plan.duration
        emitted: list[SimRequest] = []
        finished: list[SimRequest] = []
        write_through = off is not None and off.write_through
        running = ReqState.RUNNING
        for req, n in plan.items:
            if req.state is not running:
                continue  # aborted or preempted meanwhile
            computed = req.num_computed + n
            req.num_computed = computed
            full = computed // bs
            if full > req.num_registered:
                hashes = req.chain.hashes
                full = min(full, len(hashes))
                blocks = req.blocks
                for j in range(req.num_registered, full):
                    pool.register(blocks[j], hashes[j])
                req.num_registered = full
            if write_through:
                assert off is not None
                self._store_new(req, off, end)
            if computed < req.num_tokens:
                continue
            first = not req.output_idx
            req.sample()
            st.generation_tokens += 1
            if first:
                req.first_token_at = end
                st.prompt_tokens += req.prompt_len
                st.src_local_compute += req.recomputed_tokens
                st.src_local_cache_hit += req.gpu_hit_tokens
                st.src_external += req.cpu_hit_tokens + req.disk_hit_tokens
            emitted.append(req)
            if len(req.output_idx) >= req.max_tokens:
                req.state = ReqState.FINISHED
                req.finish_reason = "length"
                req.finished_at = end
                st.finished["length"] += 1
                finished.append(req)
        if finished:
            done = set(map(id, finished))
            self.running = [r for r in self.running if id(r) not in done]
            for req in finished:
                self._release(req, end)
                if off is not None:
                    off.finish_request(req.request_id)
        return StepResult(emitted, finished)

    def _store_new(self, req: SimRequest, off: OffloadManager, now: float) -> None:
        k = off.k
        limit = req.num_registered
        if off.cfg.offload_prompt_only:
            limit = min(limit, req.prompt_len // self.bs)
        n_chunks = limit // k
        if n_chunks <= req.num_stored_chunks:
            return
        hashes = req.chain.hashes
        keys = [hashes[c * k + k - 1] for c in range(req.num_stored_chunks, n_chunks)]
        end = off.store_chunks(req.request_id, keys, req.num_stored_chunks, now)
        if end is None:
            return  # allocation failure: offered again next step, as vLLM
        req.num_stored_chunks = n_chunks
        req.store_ready_at = max(req.store_ready_at, end)
