"""``harness probe URL [--model M] [--json]``: is this server usable for a run, before anyone starts one?

With the official ``openai`` client it checks: models listed, chat (plain and streamed), completions
streamed, usage in the stream, ``cached_tokens`` on a repeated prompt; with plain HTTP: ``/tokenize`` and
``/metrics``. Each check says what works and what does not. Essential checks (models, streamed chat with
content, usage in the stream) decide the exit code: 0 all essential checks pass, 1 otherwise. A server that
does not speak the OpenAI API gets one clear sentence, never a traceback.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal

import httpx
import typer

from harness.load.text import filler, key_words, stable_key
from harness.load.tokens import server_root

if TYPE_CHECKING:
    import openai  # imported at call time: it takes seconds, and the CLI must start fast

Status = Literal["ok", "warn", "fail", "skip"]
ESSENTIAL = ("models", "chat_stream", "usage_in_stream")


@dataclass
class Check:
    """One probe check."""

    name: str
    status: Status
    detail: str
    essential: bool = False


@dataclass
class ProbeReport:
    """All checks against one server."""

    url: str
    model: str | None
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every essential check passed."""
        return all(c.status == "ok" for c in self.checks if c.essential) and bool(self.checks)

    def add(self, name: str, status: Status, detail: str) -> Check:
        """Record one check's result."""
        check = Check(name, status, detail, essential=name in ESSENTIAL)
        self.checks.append(check)
        return check

    def get(self, name: str) -> Check | None:
        """The check of this name, if it ran."""
        return next((c for c in self.checks if c.name == name), None)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"url": self.url, "model": self.model, "ok": self.ok, "checks": [asdict(c) for c in self.checks]}

    def render(self) -> str:
        """Human-readable lines."""
        marks = {"ok": "ok  ", "warn": "warn", "fail": "FAIL", "skip": "skip"}
        lines = [f"probe {self.url} (model: {self.model or 'unknown'})"]
        lines += [f"  [{marks[c.status]}] {c.name}{' (essential)' if c.essential else ''}: {c.detail}"
                  for c in self.checks]
        lines.append("usable for a run" if self.ok else "NOT usable for a run: an essential check failed")
        return "\n".join(lines)


class NotOpenAI(ValueError):
    """The server answered, but not in the OpenAI format."""


def _why(exc: BaseException, what: str) -> str:
    """One clear sentence for a failed OpenAI call."""
    import openai
    if isinstance(exc, NotOpenAI):
        return f"{what} answered {exc} - this does not look like an OpenAI-compatible server"
    if isinstance(exc, openai.APIConnectionError | httpx.ConnectError):
        cause = exc.__cause__ or exc
        return f"cannot connect for {what}: {type(cause).__name__}: {cause}"
    if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException):
        return f"{what} timed out"
    if isinstance(exc, openai.APIStatusError):
        ctype = exc.response.headers.get("content-type", "?")
        body = exc.response.text.strip().replace("\n", " ")[:120]
        hint = " - this does not look like an OpenAI-compatible server" if "json" not in ctype else ""
        return f"{what} answered HTTP {exc.status_code} ({ctype}){hint}: {body}"
    if isinstance(exc, json.JSONDecodeError | openai.APIResponseValidationError | ValueError | TypeError |
                  AttributeError | KeyError):
        return (f"{what} did not answer in the OpenAI format ({type(exc).__name__}: {str(exc)[:120]}) - this "
                "does not look like an OpenAI-compatible server")
    return f"{what} failed: {type(exc).__name__}: {str(exc)[:160]}"


def _prompt(words: int) -> str:
    return " ".join(key_words(stable_key("probe", words)) + filler(words - 6))


def _models(client: openai.OpenAI, report: ProbeReport, model: str | None) -> str | None:
    resp = client.models.with_raw_response.list()
    ctype = resp.headers.get("content-type", "")
    if "json" not in ctype:
        raise NotOpenAI(f"{ctype or 'without a content type'}, not JSON")
    ids = [m.id for m in resp.parse().data]
    if not ids:
        report.add("models", "fail", "GET /v1/models lists no models")
        return None
    if model is not None and model not in ids:
        report.add("models", "fail", f"model {model!r} is not served; served: {', '.join(ids[:10])}")
        return None
    report.add("models", "ok", f"serves {', '.join(ids[:10])}")
    return model or ids[0]


def _stream(client: openai.OpenAI, model: str, api: str, prompt: str) -> tuple[int, Any]:
    """(content chunks, usage of the last chunk) of one streamed request."""
    chunks, usage = 0, None
    opts: dict[str, Any] = {"model": model, "max_tokens": 8, "stream": True, "temperature": 0,
                            "stream_options": {"include_usage": True}}
    if api == "chat":
        stream: Any = client.chat.completions.create(messages=[{"role": "user", "content": prompt}], **opts)
    else:
        stream = client.completions.create(prompt=prompt, **opts)
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices or []:
            text = choice.delta.content if api == "chat" else choice.text
            if text:
                chunks += 1
    return chunks, usage


def _cached(client: openai.OpenAI, report: ProbeReport, model: str) -> None:
    prompt = _prompt(600)
    usage = None
    for _ in range(2):
        resp = client.completions.create(model=model, prompt=prompt, max_tokens=1, temperature=0)
        usage = resp.usage
    details = getattr(usage, "prompt_tokens_details", None) if usage else None
    cached = getattr(details, "cached_tokens", None) if details else None
    if cached is None:
        report.add("cached_tokens", "warn", "usage has no prompt_tokens_details.cached_tokens (vLLM: start it "
                   "with --enable-prompt-tokens-details); per-request hit attribution will be missing")
    elif cached > 0:
        report.add("cached_tokens", "ok", f"a repeated {usage.prompt_tokens if usage else '?'}-token prompt "
                   f"reports {cached} cached tokens")
    else:
        report.add("cached_tokens", "warn", "cached_tokens is 0 on a repeated prompt (prefix caching off?)")


def _plain_http(root: str, model: str, timeout_s: float, report: ProbeReport) -> None:
    with httpx.Client(timeout=timeout_s) as http:
        try:
            resp = http.post(f"{root}/tokenize", json={"model": model, "prompt": _prompt(64)})
            count = resp.json().get("count") if resp.status_code == 200 else None
            if isinstance(count, int):
                report.add("tokenize", "ok", f"/tokenize counts tokens ({count} for a 64-word text)")
            else:
                report.add("tokenize", "warn", f"/tokenize answered HTTP {resp.status_code}; token lengths "
                           "will be calibrated from usage instead")
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            report.add("tokenize", "warn", f"/tokenize unavailable ({type(exc).__name__})")
        try:
            resp = http.get(f"{root}/metrics")
            kind = "Prometheus text" if "# TYPE" in resp.text or "# HELP" in resp.text else "a body"
            status: Status = "ok" if resp.status_code == 200 else "warn"
            report.add("metrics", status, f"/metrics answered HTTP {resp.status_code} with {kind}")
        except httpx.HTTPError as exc:
            report.add("metrics", "warn", f"/metrics unreachable ({type(exc).__name__}); server-side hit "
                       "sources will be missing")


def probe(url: str, model: str | None = None, timeout_s: float = 30.0) -> ProbeReport:
    """Run every check against ``url`` (with or without ``/v1``); never raises for server trouble."""
    import openai

    root = server_root(url)
    report = ProbeReport(url=root, model=model)
    client = openai.OpenAI(base_url=root + "/v1", api_key=os.environ.get("OPENAI_API_KEY", "EMPTY"),
                           timeout=timeout_s, max_retries=0)
    try:
        try:
            served = _models(client, report, model)
        except Exception as exc:
            report.add("models", "fail", _why(exc, "GET /v1/models"))
            return report
        if served is None:
            return report
        report.model = served
        _run_checks(client, report, served)
        _plain_http(root, served, timeout_s, report)
    finally:
        client.close()
    return report


def _run_checks(client: openai.OpenAI, report: ProbeReport, model: str) -> None:
    prompt = _prompt(48)
    try:
        resp = client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                              max_tokens=8, temperature=0)
        text = resp.choices[0].message.content if resp.choices else None
        report.add("chat", "ok" if text else "warn", "non-streamed chat answered" + ("" if text else
                                                                                     " with no content"))
    except Exception as exc:
        report.add("chat", "fail", _why(exc, "POST /v1/chat/completions"))
    usages: list[Any] = []
    for api, path in (("chat", "/v1/chat/completions"), ("completions", "/v1/completions")):
        name = f"{api}_stream"
        try:
            chunks, usage = _stream(client, model, api, prompt)
            usages.append(usage)
            report.add(name, "ok" if chunks else "fail", f"streamed {chunks} content chunk(s)")
        except Exception as exc:
            report.add(name, "fail" if api == "chat" else "warn", _why(exc, f"streamed POST {path}"))
    got = [u for u in usages if u is not None]
    if got:
        report.add("usage_in_stream", "ok", f"the last chunk carries usage (prompt {got[0].prompt_tokens}, "
                   f"completion {got[0].completion_tokens} tokens)")
    else:
        report.add("usage_in_stream", "fail", "no usage in streamed responses with stream_options.include_usage")
    try:
        _cached(client, report, model)
    except Exception as exc:
        report.add("cached_tokens", "warn", _why(exc, "a repeated completions prompt"))


def probe_command(
    url: Annotated[str, typer.Argument(help="Server URL, e.g. http://127.0.0.1:8000 (with or without /v1).")],
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model to probe (default: the first "
                                                                   "listed).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds per request.")] = 30.0,
) -> None:
    """Check that a server speaks the OpenAI API well enough for a run (exit 0) or say what is missing (1)."""
    report = probe(url, model, timeout)
    typer.echo(json.dumps(report.to_json(), indent=2) if json_out else report.render())
    raise typer.Exit(0 if report.ok else 1)
