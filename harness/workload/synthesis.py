"""Synthetic requests: weighted classes drawing prefixes from the workload's reuse structure.

Reuse structures (``workload.reuse``): system-prompt families (N prompts of L tokens, Zipf popularity), RAG
scaffolds (a template plus K of M Zipf-popular documents, in popularity order), repeated long documents,
multi-turn sessions (T turns; each turn resends the history plus a planned assistant reply and a new user
message) and ``unique_fraction`` (requests that share nothing). A class names the structure it uses, or
``any`` (one of the configured system-prompt, RAG and document structures, uniformly; sessions are only
used by classes that ask for them, since their ``prompt_tokens`` count per turn).

The assistant replies in a session's history are *planned* text of the planned output length, not the
server's actual answer, so every arm sends the same prompts; the cache reuse across turns is the history up
to the previous user message (what the server cached of its own answer does not match the planned reply).

Every random draw comes from a numpy ``Generator`` seeded by the workload seed and the stream's name (step,
user or arrival stream), so the same scenario gives the same requests in every arm, byte for byte.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from harness.config.workload import RequestClass, WorkloadSpec
from harness.workload.requests import PlannedRequest, Shape, finalize
from harness.workload.text import KEY_WORDS, segment, stable_key
from harness.workload.tokens import TokenCalibration

MIN_UNIQUE_WORDS = KEY_WORDS + 2
STRUCTURES = ("system_prompt", "rag", "session", "document")
ANY_STRUCTURES = ("system_prompt", "rag", "document")  # ``reuse: any`` draws from these (sessions: explicit)


def zipf_cdf(n: int, s: float) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Cumulative Zipf probabilities over ranks 1..n (``s = 0`` is uniform)."""
    weights = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** s
    cdf: np.ndarray[Any, np.dtype[np.float64]] = np.cumsum(weights / weights.sum())
    cdf[-1] = 1.0
    return cdf


def stream_rng(seed: int, *parts: object) -> np.random.Generator:
    """A generator for one named stream of one workload seed."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed & 0xFFFF_FFFF, seed >> 32,
                                                                       stable_key(*parts)])))


@dataclass
class _Session:
    """A session in progress: its history and what the next turn needs."""

    session_id: str
    cls: RequestClass
    family: str | None
    history: list[tuple[str, list[str]]]
    turn: int
    last_output: int
    user: int


MEMO_REQUESTS = 50_000
"""Requests kept for replay (:class:`_Memo`): about 12 KB each at the demo's prompt lengths."""

_MemoKey = tuple[str, ...]


class _Memo:
    """One stream's requests drawn so far, and the generator that draws the rest."""

    __slots__ = ("items", "source")

    def __init__(self, source: Iterator[PlannedRequest]) -> None:
        self.items: list[PlannedRequest] = []
        self.source = source


_MEMOS: OrderedDict[_MemoKey, _Memo] = OrderedDict()


def _replay(memo: _Memo) -> Iterator[PlannedRequest]:
    """The memo's requests in order, drawing (and keeping) the next one from its generator when it runs out."""
    i = 0
    while True:
        if i == len(memo.items):
            try:
                memo.items.append(next(memo.source))
            except StopIteration:
                return
        yield memo.items[i]
        i += 1


def _memoised(key: _MemoKey, make: Callable[[], Iterator[PlannedRequest]]) -> Iterator[PlannedRequest]:
    """A stream that replays what an equal stream (the same workload, calibration, tag, classes and stream) drew
    before: a stream is a pure function of those, and every arm (and the summary's hit prediction) draws the same
    ones; requests are immutable, so they are shared. At most :data:`MEMO_REQUESTS` are kept (oldest stream out)."""
    memo = _MEMOS.get(key)
    if memo is None:
        memo = _MEMOS[key] = _Memo(make())
        while len(_MEMOS) > 1 and sum(len(m.items) for m in _MEMOS.values()) > MEMO_REQUESTS:
            _MEMOS.popitem(last=False)
    else:
        _MEMOS.move_to_end(key)
    return _replay(memo)


class SynthGenerator:
    """Request streams for one step: per closed-loop user, or one open-loop arrival stream (memoised)."""

    def __init__(self, workload: WorkloadSpec, calib: TokenCalibration, tag: str,
                 classes: list[RequestClass], think_time_s: float) -> None:
        self.wl = workload
        self.calib = calib
        self.tag = tag
        self.classes = classes
        weights = np.array([c.weight for c in classes], dtype=np.float64)
        self.class_cdf = np.cumsum(weights / weights.sum())
        self.class_cdf[-1] = 1.0
        reuse = workload.reuse
        configured = {"system_prompt": reuse.system_prompts, "rag": reuse.rag, "session": reuse.sessions,
                      "document": reuse.documents}
        self.structures = [s for s in ANY_STRUCTURES if configured[s] is not None]
        self.think_time_s = think_time_s
        self.sys_cdf = zipf_cdf(reuse.system_prompts.families, reuse.system_prompts.zipf_s) \
            if reuse.system_prompts else None
        self.doc_cdf = zipf_cdf(reuse.documents.count, reuse.documents.zipf_s) if reuse.documents else None
        self.rag_p = None
        if reuse.rag:
            w = 1.0 / np.arange(1, reuse.rag.documents + 1, dtype=np.float64) ** reuse.rag.zipf_s
            self.rag_p = w / w.sum()
        self._memo_key: _MemoKey = (workload.model_dump_json(), calib.model_dump_json(), tag,
                                    *(c.model_dump_json() for c in classes), repr(float(think_time_s)))

    # --- draws -------------------------------------------------------------------------------------------
    def _pick_class(self, rng: np.random.Generator) -> RequestClass:
        return self.classes[int(np.searchsorted(self.class_cdf, rng.random(), side="right"))]

    def _structure(self, cls: RequestClass, rng: np.random.Generator) -> str:
        unique_draw = rng.random()
        any_draw = rng.random()
        if unique_draw < self.wl.reuse.unique_fraction or cls.reuse == "unique":
            return "unique"
        if cls.reuse != "any":
            return cls.reuse
        if not self.structures:
            return "unique"
        return self.structures[min(int(any_draw * len(self.structures)), len(self.structures) - 1)]

    @staticmethod
    def _draw(rng: np.random.Generator, lo: int, hi: int) -> int:
        return int(rng.integers(lo, hi + 1))

    def _words(self, tokens: int) -> int:
        return self.calib.words_for(tokens)

    # --- building blocks ---------------------------------------------------------------------------------
    def _unique(self, *parts: object, words: int) -> list[str]:
        return segment(stable_key(self.wl.seed, self.tag, *parts), max(words, 1))

    def _system_prompt(self, rng: np.random.Generator) -> tuple[int, list[str]]:
        sp = self.wl.reuse.system_prompts
        assert sp is not None and self.sys_cdf is not None
        fam = int(np.searchsorted(self.sys_cdf, rng.random(), side="right"))
        return fam, segment(stable_key(self.wl.seed, "sys", fam), self._words(sp.tokens))

    def _single(self, cls: RequestClass, structure: str, rng: np.random.Generator,
                shape: Shape) -> PlannedRequest:
        """A one-shot request: shared prefix (cut to fit) + a unique question."""
        api = self.wl.api
        total = self._draw(rng, cls.prompt_tokens.min, cls.prompt_tokens.max)
        out = self._draw(rng, cls.output_tokens.min, cls.output_tokens.max)
        has_system = structure == "system_prompt" and api == "chat"
        budget = self._words(total - self.calib.overhead(api, 2 if has_system else 1))
        prefix: list[str] = []
        family: str | None = None
        if structure == "system_prompt":
            fam, prefix = self._system_prompt(rng)
            family = f"sys:{fam}"
        elif structure == "document":
            docs = self.wl.reuse.documents
            assert docs is not None and self.doc_cdf is not None
            idx = int(np.searchsorted(self.doc_cdf, rng.random(), side="right"))
            prefix = segment(stable_key(self.wl.seed, "doc", idx), self._words(docs.tokens))
            family = f"doc:{idx}"
        elif structure == "rag":
            rag = self.wl.reuse.rag
            assert rag is not None and self.rag_p is not None
            picks = sorted(int(i) for i in rng.choice(rag.documents, size=rag.docs_per_request, replace=False,
                                                       p=self.rag_p))
            prefix = segment(stable_key(self.wl.seed, "rag-template"), self._words(rag.template_tokens))
            for i in picks:
                prefix = prefix + segment(stable_key(self.wl.seed, "rag-doc", i), self._words(rag.doc_tokens))
            family = "rag:" + ",".join(str(i) for i in picks)
        prefix = prefix[:max(0, budget - MIN_UNIQUE_WORDS)]
        question = self._unique(shape.key, "q", words=budget - len(prefix))
        messages = [("system", prefix), ("user", question)] if has_system else [("user", prefix + question)]
        shape = replace(shape, prefix_family=family)
        return finalize(shape, api, messages, out, calib=self.calib,
                        hash_block_tokens=self.wl.hash_block_tokens)

    def _start_session(self, cls: RequestClass, rng: np.random.Generator, user: int, sid: str) -> _Session:
        history: list[tuple[str, list[str]]] = []
        family = None
        if self.wl.reuse.system_prompts is not None:
            fam, words = self._system_prompt(rng)
            family = f"sys:{fam}"
            history.append(("system", words))
        return _Session(session_id=sid, cls=cls, family=family, history=history, turn=0, last_output=0,
                        user=user)

    def _turn(self, sess: _Session, rng: np.random.Generator, shape: Shape) -> PlannedRequest:
        """The next turn of a session: history + (planned) previous answer + a new user message."""
        cls = sess.cls
        if sess.turn > 0:
            sess.history.append(("assistant", self._unique(sess.session_id, "a", sess.turn - 1,
                                                           words=self._words(sess.last_output))))
        new = self._words(self._draw(rng, cls.prompt_tokens.min, cls.prompt_tokens.max))
        out = self._draw(rng, cls.output_tokens.min, cls.output_tokens.max)
        sess.history.append(("user", self._unique(sess.session_id, "u", sess.turn, words=new)))
        shape = replace(shape, prefix_family=sess.family, session_id=sess.session_id, turn=sess.turn)
        req = finalize(shape, self.wl.api, list(sess.history), out, calib=self.calib,
                       hash_block_tokens=self.wl.hash_block_tokens)
        sess.turn += 1
        sess.last_output = out
        return req

    def _turns(self) -> int:
        sessions = self.wl.reuse.sessions
        return sessions.turns if sessions is not None else 1

    def _session_think(self) -> float:
        sessions = self.wl.reuse.sessions
        return sessions.think_time_s if sessions is not None else 0.0

    # --- streams -----------------------------------------------------------------------------------------
    def user_stream(self, user: int) -> Iterator[PlannedRequest]:
        """Closed loop: user ``user``'s endless request sequence (sessions run turn after turn)."""
        return _memoised((*self._memo_key, "user", str(user)), lambda: self._user_stream(user))

    def arrival_stream(self, rate_rps: float) -> Iterator[PlannedRequest]:
        """Open loop: Poisson arrivals; a session's next turn takes the first arrival after its think time."""
        return _memoised((*self._memo_key, "arrivals", repr(float(rate_rps))), lambda: self._arrival_stream(rate_rps))

    def _user_stream(self, user: int) -> Iterator[PlannedRequest]:
        rng = stream_rng(self.wl.seed, self.tag, "user", user)
        seq = 0
        sessions = 0
        while True:
            cls = self._pick_class(rng)
            structure = self._structure(cls, rng)
            if structure == "session":
                sess = self._start_session(cls, rng, user, f"{self.tag}/u{user}/s{sessions}")
                sessions += 1
                for t in range(self._turns()):
                    think = self._session_think() if t > 0 else self.think_time_s
                    yield self._turn(sess, rng, Shape(key=f"u{user}.{seq}", user=user, seq=seq,
                                                      request_class=cls.name, think_s=think))
                    seq += 1
                continue
            yield self._single(cls, structure, rng, Shape(key=f"u{user}.{seq}", user=user, seq=seq,
                                                          request_class=cls.name, think_s=self.think_time_s))
            seq += 1

    def _arrival_stream(self, rate_rps: float) -> Iterator[PlannedRequest]:
        rng = stream_rng(self.wl.seed, self.tag, "arrivals")
        t = 0.0
        seq = 0
        pending: list[tuple[float, int, int]] = []  # (ready time, order, session index)
        live: dict[int, _Session] = {}
        n_sessions = 0
        while True:
            t += float(rng.exponential(1.0 / rate_rps))
            shape_args: dict[str, Any] = {"key": f"a{seq}", "user": seq, "seq": seq, "offset_s": t}
            if pending and pending[0][0] <= t:
                _, _, idx = heapq.heappop(pending)
                sess = live[idx]
                req = self._turn(sess, rng, Shape(request_class=sess.cls.name, **shape_args))
                if sess.turn < self._turns():
                    heapq.heappush(pending, (t + self._session_think(), idx, idx))
                else:
                    del live[idx]
                yield req
            else:
                cls = self._pick_class(rng)
                structure = self._structure(cls, rng)
                if structure == "session":
                    sess = self._start_session(cls, rng, seq, f"{self.tag}/a/s{n_sessions}")
                    req = self._turn(sess, rng, Shape(request_class=cls.name, **shape_args))
                    if sess.turn < self._turns():
                        live[n_sessions] = sess
                        heapq.heappush(pending, (t + self._session_think(), n_sessions, n_sessions))
                    n_sessions += 1
                    yield req
                else:
                    yield self._single(cls, structure, rng, Shape(request_class=cls.name, **shape_args))
            seq += 1


def longest_prompt(workload: WorkloadSpec, cls: RequestClass, calib: TokenCalibration) -> tuple[int, str]:
    """The longest prompt (tokens) a class can produce, and what makes it (for ``max_model_len`` checks)."""
    worst, why = cls.prompt_tokens.max, f"prompts of up to {cls.prompt_tokens.max} tokens"
    sessions = workload.reuse.sessions
    if cls.reuse == "session" and sessions is not None:
        sp = workload.reuse.system_prompts
        turns = sessions.turns
        total = (sp.tokens if sp else 0) + turns * cls.prompt_tokens.max + (turns - 1) * cls.output_tokens.max
        total += calib.overhead(workload.api, 2 * turns + (1 if sp else 0))
        if total > worst:
            worst = total
            why = f"the last turn of a {turns}-turn session (history included) reaches {total} tokens"
    return worst, why

