"""The opt-in cold start of an attached server through the engine's reset, judged by a canary that can fail: a
toy server (a prefix cache of whole prompts and cumulative hit counters) stands in for the engine."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.run.cold_readers import Counters
from harness.run.cold_reset import RESET_TRIES, ResetReply, measure_reset, reply_success
from harness.run.cold_start import judge_reset
from harness.schema.cold_start import ColdProbe, ColdStart

TOKENS = 96


@dataclass
class ToyServer:
    """Warm from earlier traffic; its counters only grow; ``replies`` are the reset's answers in turn."""

    replies: list[ResetReply] = field(default_factory=lambda: [ResetReply(200, '{"success": true}')])
    empties: bool = True  # a reset that answers success really empties the cache
    exposes_counters: bool = True
    reports_cached: bool = True
    hits: float = 4096.0
    cache: set[str] = field(default_factory=lambda: {"earlier traffic"})
    resets: int = 0

    def read(self) -> Counters:
        if not self.exposes_counters:
            return dict.fromkeys(("hit_tokens.gpu", "hit_tokens.total")), None
        return {"hit_tokens.gpu": self.hits, "hit_tokens.total": self.hits}, None

    def send(self, prompt: str) -> ColdProbe:
        hit = prompt in self.cache
        self.cache.add(prompt)
        if hit:
            self.hits += TOKENS
        return ColdProbe(prompt_tokens=TOKENS, cached_tokens=(TOKENS if hit else 0) if self.reports_cached else None)

    def reset(self) -> ResetReply:
        reply = self.replies[min(self.resets, len(self.replies) - 1)]
        self.resets += 1
        if reply.status == 200 and reply_success(reply.body) and self.empties:
            self.cache.clear()
        return reply


def run(server: ToyServer) -> ColdStart:
    return judge_reset(measure_reset(server.read, server.send, server.reset))


def test_a_warm_server_reset_and_shown_empty_by_the_canary_is_proven() -> None:
    server = ToyServer()
    proof = run(server)
    assert (proof.proof, proof.cold, proof.actions) == ("proven", True, ["engine-reset"])
    reset = proof.reset
    assert reset is not None and (reset.status, reset.success, reset.error, reset.attempts) == (200, True, None, 1)
    assert reset.counters_before["hit_tokens.total"] == 4096.0  # warm, and never zero again: counters only grow
    assert reset.counters_after["hit_tokens.total"] == 4096.0 + TOKENS  # re-read after the reply
    assert reset.canary is not None
    assert (reset.canary.repeat_hit_tokens, reset.canary.after_reset_hit_tokens) == (TOKENS, 0.0)
    assert "earlier traffic" not in server.cache


def test_a_reset_that_answers_success_but_keeps_the_cache_is_warm() -> None:
    proof = run(ToyServer(empties=False))
    assert proof.proof == "warm"
    assert proof.reset is not None and proof.reset.canary is not None
    assert proof.reset.canary.after_reset_hit_tokens == TOKENS


def test_success_false_is_retried_then_recorded_as_a_failure() -> None:
    busy = ResetReply(200, '{"success": false}')
    later = run(ToyServer(replies=[busy, ResetReply(200, '{"success": true}')]))
    assert later.proof == "proven" and later.reset is not None and later.reset.attempts == 2
    never = run(ToyServer(replies=[busy]))
    assert never.reset is not None
    assert (never.reset.attempts, never.reset.success) == (RESET_TRIES, False) and never.reset.error
    assert never.proof == "warm"  # judged as found: the counters read 4096 hits before anything was sent
    assert "engine-reset" not in (never.actions or [])


def test_a_failed_reply_is_recorded_and_never_proves() -> None:
    for reply in (ResetReply(404, '{"detail":"Not Found"}'), ResetReply(500, "boom"), ResetReply(200, ""),
                  ResetReply(None, error="ConnectError: refused")):
        proof = run(ToyServer(replies=[reply]))
        assert proof.reset is not None and proof.reset.error is not None, reply
        assert proof.reset.status == reply.status and proof.reset.attempts == 1
        assert proof.proof != "proven" and proof.reset.canary is not None
        assert proof.reset.canary.after_reset_hit_tokens is None  # no canary after a reset not shown done
    unread = run(ToyServer(replies=[ResetReply(404, "")], exposes_counters=False, reports_cached=False))
    assert unread.proof == "not-proven"


def test_without_counters_or_cached_tokens_the_canary_cannot_prove() -> None:
    assert run(ToyServer(exposes_counters=False, reports_cached=False)).proof == "not-proven"
    usage_only = run(ToyServer(exposes_counters=False))  # usage's cached tokens show the repeat hit, then none
    assert usage_only.proof == "proven"
    assert usage_only.reset is not None and usage_only.reset.canary is not None
    assert (usage_only.reset.canary.repeat_cached_tokens, usage_only.reset.canary.after_reset_cached_tokens) == (
        TOKENS, 0)


def test_reply_success_reads_only_a_boolean() -> None:
    assert reply_success('{"success": true}') is True
    assert reply_success('{"success": false}') is False
    assert reply_success('{"success": "true"}') is None
    assert reply_success("") is None
    assert reply_success("[]") is None
