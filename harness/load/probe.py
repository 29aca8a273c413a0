"""``harness probe URL [--model M] [--json]``: is this server usable for a run, before anyone starts one?

With the official ``openai`` client it checks: models listed, chat (plain and streamed), completions
streamed, usage in the stream, ``cached_tokens`` on a repeated prompt; with plain HTTP: ``/tokenize`` and
``/metrics``. Each check says what works and what does not. Essential checks (models, streamed chat with
content, usage in the stream) decide the exit code: 0 all essential checks pass, 1 otherwise. A server that
does not speak the OpenAI API gets one clear sentence, never a traceback.

No hostile server can hang it or make it read without end: every check is bounded as a whole by ``--timeout``
(headers, body and stream together: a slow-loris server, a dripping body, an endless stream are each a failed check
after ``--timeout`` s), so the whole probe takes at most :data:`CHECKS` x ``--timeout``; every answer is capped
after decompression (:mod:`harness.core.net.caps`: a gzip bomb or an SSE line without end is a failed check
``body too large (> N bytes)``). Ctrl-C stops it at once. A credential is sent only when asked
(``--api-key-env NAME``) and the output says so (never the value). What the server sent is printed through
:func:`harness.core.term.safe_text`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from collections.abc import Awaitable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, cast

import httpx
import typer

from harness.core.exit_codes import ExitCode
from harness.core.net.bounded import BodyTooLarge, FetchError, afetch, capped_client
from harness.core.net.caps import API_MAX_BYTES, METRICS_MAX_BYTES
from harness.core.term import safe_text
from harness.secrets.forms import mask_text
from harness.workload.text import filler, key_words, stable_key
from harness.workload.tokens import server_root

if TYPE_CHECKING:
    import openai  # imported at call time: it takes seconds, and the CLI must start fast

Status = Literal["ok", "warn", "fail", "skip"]
ESSENTIAL = ("models", "chat_stream", "usage_in_stream")
CHECKS = 7  # models, chat, chat_stream, completions_stream, cached_tokens, tokenize, metrics: one --timeout each
T = TypeVar("T")


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
    credential: str | None = None  # where the bearer token sent came from (``$NAME``), never its value

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
        return {"url": mask_text(self.url), "model": self.model, "ok": self.ok,
                "credential_sent_from": self.credential, "checks": [asdict(c) for c in self.checks]}

    def render(self) -> str:
        """Human-readable lines; everything the server sent is made safe for the terminal."""
        marks = {"ok": "ok  ", "warn": "warn", "fail": "FAIL", "skip": "skip"}
        lines = [f"probe {mask_text(self.url)} (model: {self.model or 'unknown'})",
                 f"credential: Authorization: Bearer ${self.credential} was sent" if self.credential else
                 "credential: none sent (--api-key-env NAME sends one)"]
        lines += [f"  [{marks[c.status]}] {c.name}{' (essential)' if c.essential else ''}: {c.detail}"
                  for c in self.checks]
        lines.append("usable for a run" if self.ok else "NOT usable for a run: an essential check failed")
        return "\n".join(safe_text(line) for line in lines)


class NotOpenAI(ValueError):
    """The server answered, but not in the OpenAI format."""


def _cause(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """``exc`` or the first exception of ``kind`` it was raised from (bounded walk)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None or isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _why(exc: BaseException, what: str, timeout_s: float) -> str:
    """One clear sentence for a failed OpenAI call."""
    import openai
    if isinstance(exc, TimeoutError):
        return f"{what} gave no complete answer within --timeout {timeout_s:g} s"
    too_large = _cause(exc, BodyTooLarge)
    if too_large is not None:
        return f"{what} answered a {too_large} - refused"
    if isinstance(exc, NotOpenAI):
        return f"{what} answered {exc} - this does not look like an OpenAI-compatible server"
    if isinstance(exc, openai.APIConnectionError | httpx.ConnectError):
        cause = exc.__cause__ or exc
        return f"cannot connect for {what}: {type(cause).__name__}: {cause}"
    if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException):
        return f"{what} timed out"
    if isinstance(exc, openai.APIStatusError):
        ctype = exc.response.headers.get("content-type", "?")
        try:
            body = exc.response.text.strip().replace("\n", " ")[:120]
        except (httpx.HTTPError, UnicodeDecodeError):
            body = "(body not read)"
        hint = " - this does not look like an OpenAI-compatible server" if "json" not in ctype else ""
        return f"{what} answered HTTP {exc.status_code} ({ctype}){hint}: {body}"
    if isinstance(exc, json.JSONDecodeError | openai.APIResponseValidationError | ValueError | TypeError |
                  AttributeError | KeyError):
        return (f"{what} did not answer in the OpenAI format ({type(exc).__name__}: {str(exc)[:120]}) - this "
                "does not look like an OpenAI-compatible server")
    return f"{what} failed: {type(exc).__name__}: {str(exc)[:160]}"


def _prompt(words: int) -> str:
    return " ".join(key_words(stable_key("probe", words)) + filler(words - 6))


async def _bounded(call: Awaitable[T], timeout_s: float) -> T:
    """``call`` as a whole within ``timeout_s`` (TimeoutError otherwise)."""
    async with asyncio.timeout(timeout_s):
        return await call


async def _models(client: openai.AsyncOpenAI, report: ProbeReport, model: str | None) -> str | None:
    resp = await client.models.with_raw_response.list()
    ctype = resp.headers.get("content-type", "")
    if "json" not in ctype:
        raise NotOpenAI(f"{ctype or 'without a content type'}, not JSON")
    parsed: Any = resp.parse()
    if inspect.isawaitable(parsed):
        parsed = await parsed
    ids = [str(m.id) for m in parsed.data]
    if not ids:
        report.add("models", "fail", "GET /v1/models lists no models")
        return None
    if model is not None and model not in ids:
        report.add("models", "fail", f"model {model!r} is not served; served: {', '.join(ids[:10])}")
        return None
    report.add("models", "ok", f"serves {', '.join(ids[:10])}")
    return model or ids[0]


async def _stream(client: openai.AsyncOpenAI, model: str, api: str, prompt: str) -> tuple[int, Any]:
    """(content chunks, usage of the last chunk) of one streamed request."""
    chunks, usage = 0, None
    opts: dict[str, Any] = {"model": model, "max_tokens": 8, "stream": True, "temperature": 0,
                            "stream_options": {"include_usage": True}}
    if api == "chat":
        stream: Any = await client.chat.completions.create(messages=[{"role": "user", "content": prompt}],
                                                           **opts)
    else:
        stream = await client.completions.create(prompt=prompt, **opts)
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices or []:
            text = choice.delta.content if api == "chat" else choice.text
            if text:
                chunks += 1
    return chunks, usage


async def _cached(client: openai.AsyncOpenAI, report: ProbeReport, model: str) -> None:
    prompt = _prompt(600)
    usage = None
    for _ in range(2):
        resp = await client.completions.create(model=model, prompt=prompt, max_tokens=1, temperature=0)
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


async def _plain_http(root: str, model: str, timeout_s: float, report: ProbeReport) -> None:
    async with capped_client(API_MAX_BYTES, timeout_s=timeout_s) as http:
        try:
            resp = await afetch(http, "POST", f"{root}/tokenize", deadline_s=timeout_s,
                                json_body={"model": model, "prompt": _prompt(64)})
            body = resp.json() if resp.status == 200 else None
            count = body.get("count") if isinstance(body, dict) else None
            if isinstance(count, int):
                report.add("tokenize", "ok", f"/tokenize counts tokens ({count} for a 64-word text)")
            else:
                report.add("tokenize", "warn", f"/tokenize answered HTTP {resp.status}; token lengths "
                           "will be calibrated from usage instead")
        except (FetchError, ValueError) as exc:
            report.add("tokenize", "warn", f"/tokenize unavailable ({exc})")
    async with capped_client(METRICS_MAX_BYTES, timeout_s=timeout_s) as http:
        try:
            resp = await afetch(http, "GET", f"{root}/metrics", deadline_s=timeout_s)
            text = resp.text()
            kind = "Prometheus text" if "# TYPE" in text or "# HELP" in text else "a body"
            status: Status = "ok" if resp.status == 200 else "warn"
            report.add("metrics", status, f"/metrics answered HTTP {resp.status} with {kind}")
        except FetchError as exc:
            report.add("metrics", "warn", f"/metrics unreachable ({exc}); server-side hit sources will be missing")


def probe(url: str, model: str | None = None, timeout_s: float = 30.0, *,
          api_key: str | None = None, api_key_env: str | None = None) -> ProbeReport:
    """Run every check against ``url`` (with or without ``/v1``); never raises for server trouble.

    ``api_key`` is sent as a bearer token only when given (``api_key_env`` names where it came from, for the
    report); nothing from the environment is sent otherwise. Each check is bounded by ``timeout_s``.
    """
    return asyncio.run(_probe(url, model, timeout_s, api_key, api_key_env))


async def _drop_credentials(request: httpx.Request) -> None:
    request.headers.pop("Authorization", None)


async def _probe(url: str, model: str | None, timeout_s: float, api_key: str | None,
                 api_key_env: str | None) -> ProbeReport:
    import openai

    root = server_root(url)
    report = ProbeReport(url=root, model=model, credential=(api_key_env or "api_key") if api_key else None)
    http = capped_client(API_MAX_BYTES, timeout_s=timeout_s)
    if not api_key:  # the SDK insists on a key: a placeholder, taken off every request before it is sent
        http.event_hooks = {"request": [_drop_credentials], "response": []}
    client = openai.AsyncOpenAI(base_url=root + "/v1", api_key=api_key or "placeholder", timeout=timeout_s,
                                max_retries=0, http_client=cast(Any, http))  # a legacy httpx client: accepted
    try:
        try:
            served = await _bounded(_models(client, report, model), timeout_s)
        except Exception as exc:
            report.add("models", "fail", _why(exc, "GET /v1/models", timeout_s))
            return report
        if served is None:
            return report
        report.model = served
        await _run_checks(client, report, served, timeout_s)
        await _plain_http(root, served, timeout_s, report)
    finally:
        await client.close()
        await http.aclose()
    return report


async def _run_checks(client: openai.AsyncOpenAI, report: ProbeReport, model: str, timeout_s: float) -> None:
    prompt = _prompt(48)
    try:
        resp = await _bounded(client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": prompt}], max_tokens=8, temperature=0), timeout_s)
        text = resp.choices[0].message.content if resp.choices else None
        report.add("chat", "ok" if text else "warn", "non-streamed chat answered" + ("" if text else
                                                                                     " with no content"))
    except Exception as exc:
        report.add("chat", "fail", _why(exc, "POST /v1/chat/completions", timeout_s))
    usages: list[Any] = []
    for api, path in (("chat", "/v1/chat/completions"), ("completions", "/v1/completions")):
        name = f"{api}_stream"
        try:
            chunks, usage = await _bounded(_stream(client, model, api, prompt), timeout_s)
            usages.append(usage)
            report.add(name, "ok" if chunks else "fail", f"streamed {chunks} content chunk(s)")
        except Exception as exc:
            report.add(name, "fail" if api == "chat" else "warn", _why(exc, f"streamed POST {path}", timeout_s))
    got = [u for u in usages if u is not None]
    if got:
        report.add("usage_in_stream", "ok", f"the last chunk carries usage (prompt {got[0].prompt_tokens}, "
                   f"completion {got[0].completion_tokens} tokens)")
    else:
        report.add("usage_in_stream", "fail", "no usage in streamed responses with stream_options.include_usage")
    try:
        await _bounded(_cached(client, report, model), timeout_s)
    except Exception as exc:
        report.add("cached_tokens", "warn", _why(exc, "a repeated completions prompt", timeout_s))


def _check_url(url: str) -> str | None:
    """Why ``url`` cannot be probed, or None."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        return f"bad URL {url!r}: {exc}"
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return f"bad URL {url!r}: expected http://HOST[:PORT][/v1] or https://..."
    return None


def probe_command(
    url: Annotated[str, typer.Argument(help="Server URL, e.g. http://127.0.0.1:8000 (with or without /v1).")],
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model to probe (default: the first "
                                                                   "listed).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    timeout: Annotated[float, typer.Option(min=0.1, max=3600.0, help=f"Seconds per check, as a whole (headers, "
                                           f"body, stream); the probe takes at most {CHECKS} x this.")] = 30.0,
    api_key_env: Annotated[str | None, typer.Option(
        "--api-key-env", metavar="NAME", help="Send 'Authorization: Bearer $NAME' (the value of environment "
        "variable NAME, e.g. OPENAI_API_KEY). Without it no credential is sent, whatever the environment holds.",
        show_default=False)] = None,
) -> None:
    """Check that a server speaks the OpenAI API well enough for a run (exit 0) or say what is missing (1).

    Exit 2 for a bad URL or an unset --api-key-env variable."""
    problem = _check_url(url)
    api_key = None
    if problem is None and api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            problem = f"--api-key-env {api_key_env}: environment variable {api_key_env} is not set or empty"
    if problem is not None:
        typer.echo(f"error: {safe_text(problem)}", err=True)
        raise typer.Exit(ExitCode.BAD_INPUT)
    report = probe(url, model, timeout, api_key=api_key, api_key_env=api_key_env)
    typer.echo(json.dumps(report.to_json(), indent=2) if json_out else report.render())
    raise typer.Exit(ExitCode.OK if report.ok else ExitCode.NO_GO)  # the server is a no-go for a run
