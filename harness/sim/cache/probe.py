"""The fs tier's existence check as vLLM 0.32 makes it: asynchronous, answered one engine step later.

vLLM's ``FsAsyncLookupManager`` (``vllm/v1/kv_offload/tiering/async_lookup.py``): a key's first lookup starts a probe
and answers "not yet" (``RETRY``: the request is deferred and asked again next step); the step's probes are sent when
it ends and checked on the file system then (:meth:`FsProbes.end_step`); an answer is kept while any request that
asked for it is alive, so later lookups of the key -- by any request -- get it at once, even if the file has come or
gone since. A request's references end when it has finished and its own stores have completed (vLLM finalizes the
secondary tier only then, :meth:`FsProbes.release`); an answer no request references is forgotten.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable


class FsProbes:
    """Cached, one-step-late answers to "is this chunk on disk?"."""

    def __init__(self, exists: Callable[[int], bool]) -> None:
        self._exists = exists
        self._answer: dict[int, bool | None] = {}  # None: probe not answered yet
        self._refs: dict[int, set[str]] = {}
        self._asked_by: dict[str, set[int]] = {}
        self._batch: list[int] = []
        self._releases: list[tuple[float, str]] = []
        self.probes = 0

    def __len__(self) -> int:
        return len(self._answer)

    def ask(self, req_id: str, key: int, now: float) -> bool | None:
        """The cached answer for ``key`` (``None``: not yet, a probe is on its way)."""
        self._release_due(now)
        if key not in self._answer:
            self._answer[key] = None
            self._refs[key] = set()
            self._batch.append(key)
        self._refs[key].add(req_id)
        asked = self._asked_by.get(req_id)
        if asked is None:  # (setdefault would build a set on every call)
            asked = self._asked_by[req_id] = set()
        asked.add(key)
        return self._answer[key]

    def forget(self, key: int) -> None:
        """The file turned out to be gone (vLLM marks a failed promotion's key a miss)."""
        if key in self._answer:
            self._answer[key] = False

    def end_step(self, now: float) -> bool:
        """The step ended: its probes are answered (the file system as it is now); True if there were any."""
        self._release_due(now)
        batch, self._batch = self._batch, []
        answered = False
        for key in dict.fromkeys(batch):
            if key in self._answer and self._answer[key] is None:
                self._answer[key] = self._exists(key)
                self.probes += 1
                answered = True
                if not self._refs[key]:
                    self._drop(key)
        return answered

    def release(self, req_id: str, at: float, now: float) -> None:
        """``req_id`` finished; its references end at ``at`` (when its stores have completed)."""
        heapq.heappush(self._releases, (at, req_id))
        self._release_due(now)

    def _release_due(self, now: float) -> None:
        releases = self._releases
        while releases and releases[0][0] <= now:
            _at, req_id = heapq.heappop(releases)
            for key in self._asked_by.pop(req_id, ()):
                refs = self._refs.get(key)
                if refs is None:
                    continue
                refs.discard(req_id)
                if not refs and self._answer[key] is not None:
                    self._drop(key)

    def _drop(self, key: int) -> None:
        del self._answer[key]
        del self._refs[key]
