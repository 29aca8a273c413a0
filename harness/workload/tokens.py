"""Token-length calibration: how many of the server's tokens our synthetic words and chat framing cost.

The plan asks for prompts of N tokens of the *server's* tokenizer. :func:`calibrate_tokenizer` measures, once
per run, tokens per word and the fixed overheads (BOS, chat template) with the server's ``/tokenize``
endpoint where it exists (vLLM, the simulator), else from ``usage.prompt_tokens`` of two tiny non-streamed
requests, else it falls back to a heuristic and says so. The method is recorded with the calibration; target
and actual lengths are both recorded per request (``prompt_tokens_target`` / ``prompt_tokens``).

Each calibration request is one whole request under ``timeout_s`` with its answer capped
(:data:`~harness.core.net.caps.API_MAX_BYTES`): at most 8 requests, so a hostile server costs at most
``8 * timeout_s``; ``cancel`` (Ctrl-C) ends it within about 0.1 s.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.core.net.bounded import FetchCancelled, FetchError, fetch
from harness.core.net.caps import API_MAX_BYTES
from harness.workload.text import filler, key_words, stable_key

CalibrationMethod = Literal["tokenize", "usage", "heuristic", "exact-words"]

_SMALL, _LARGE = 64, 576  # words in the two calibration texts


class TokenCalibration(BaseModel):
    """Tokens per synthetic word and the fixed prompt overheads of one server's tokenizer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: CalibrationMethod
    tokens_per_word: float = Field(gt=0, le=100)
    completion_overhead: int = Field(default=0, ge=0, le=100_000, description="tokens added to a "
                                     "completions prompt (e.g. BOS)")
    chat_overhead: int = Field(default=0, ge=0, le=100_000, description="tokens a one-message chat adds "
                               "around its content (role markers, template, generation prompt)")
    chat_message_overhead: int = Field(default=0, ge=0, le=100_000, description="tokens each further "
                                       "message adds")
    max_model_len: int | None = Field(default=None, ge=1)
    note: str | None = None

    def words_for(self, tokens: int) -> int:
        """Words that make about ``tokens`` tokens (at least 1 for a positive target)."""
        if tokens <= 0:
            return 0
        return max(1, round(tokens / self.tokens_per_word))

    def tokens_for(self, words: int) -> int:
        """Estimated tokens of ``words`` words."""
        return round(words * self.tokens_per_word)

    def overhead(self, api: str, messages: int = 1) -> int:
        """Template tokens around the content for one request."""
        if api == "completions":
            return self.completion_overhead
        return self.chat_overhead + max(0, messages - 1) * self.chat_message_overhead


EXACT_WORDS = TokenCalibration(method="exact-words", tokens_per_word=1.0, chat_overhead=2,
                               chat_message_overhead=1,
                               note="one token per word, role markers one token each (simulator)")
"""The simulator's rules, for plans made without a server (tests, ``harness plan``)."""

HEURISTIC_NOTE = "no /tokenize and no usage: 1.3 tokens per word assumed"
HEURISTIC = TokenCalibration(method="heuristic", tokens_per_word=1.3, completion_overhead=1, chat_overhead=8,
                             chat_message_overhead=4, note=HEURISTIC_NOTE)


def calibration_text(words: int) -> str:
    """The text used to calibrate: a key then filler, exactly like plan segments."""
    return " ".join(key_words(stable_key("calibration")) + filler(max(0, words - 6)))


def server_root(base_url: str) -> str:
    """``http://host:port`` from a base URL given with or without ``/v1``."""
    root = base_url.rstrip("/")
    return root[:-3] if root.endswith("/v1") else root


Post = Callable[[str, dict[str, Any]], Any]
"""POST a JSON body to a URL and return the parsed JSON answer (raises FetchError / ValueError)."""
Counter = Callable[[Post, str, str, dict[str, Any]], tuple[int, int | None]]


def _poster(timeout_s: float, cancel: threading.Event | None) -> Post:
    def post(url: str, body: dict[str, Any]) -> Any:
        resp = fetch("POST", url, deadline_s=timeout_s, max_body_bytes=API_MAX_BYTES, json_body=body,
                     cancel=cancel)
        if resp.status != 200:
            raise FetchError(f"HTTP {resp.status}")
        return resp.json()
    return post


def _count_tokenize(post: Post, root: str, model: str, payload: dict[str, Any]) -> tuple[int, int | None]:
    body = post(f"{root}/tokenize", {"model": model, **payload})
    count = body.get("count")
    if not isinstance(count, int):
        tokens = body.get("tokens")
        if not isinstance(tokens, list):
            raise ValueError("/tokenize answered without 'count' or 'tokens'")
        count = len(tokens)
    mml = body.get("max_model_len")
    return count, mml if isinstance(mml, int) else None


def _count_usage(post: Post, root: str, model: str, payload: dict[str, Any]) -> tuple[int, int | None]:
    path = "/v1/chat/completions" if "messages" in payload else "/v1/completions"
    body = post(f"{root}{path}", {"model": model, **payload, "max_tokens": 1, "stream": False, "temperature": 0})
    count = body.get("usage", {}).get("prompt_tokens")
    if not isinstance(count, int):
        raise ValueError(f"{path} answered without usage.prompt_tokens")
    return count, None


def _fit(count: Counter, model: str, client: Post, root: str) -> tuple[TokenCalibration, int | None]:
    small, large = calibration_text(_SMALL), calibration_text(_LARGE)
    c_small, mml = count(client, root, model, {"prompt": small})
    c_large, mml2 = count(client, root, model, {"prompt": large})
    per_word = (c_large - c_small) / (_LARGE - _SMALL)
    if per_word <= 0:
        raise ValueError(f"token counts do not grow with the text ({c_small} -> {c_large})")
    comp_over = max(0, round(c_small - _SMALL * per_word))
    chat1, _ = count(client, root, model, {"messages": [{"role": "user", "content": small}]})
    chat2, _ = count(client, root, model, {"messages": [{"role": "system", "content": small},
                                                        {"role": "user", "content": small}]})
    chat_over = max(0, round(chat1 - _SMALL * per_word))
    msg_over = max(0, round(chat2 - chat1 - _SMALL * per_word))
    exact = per_word == 1.0 and c_small == _SMALL
    calib = TokenCalibration(method="tokenize", tokens_per_word=round(per_word, 6),
                             completion_overhead=comp_over, chat_overhead=chat_over,
                             chat_message_overhead=msg_over, max_model_len=mml or mml2,
                             note="one token per word" if exact else None)
    return calib, mml or mml2


def calibrate_tokenizer(base_url: str, served_model: str, timeout_s: float = 30.0, *,
                        cancel: threading.Event | None = None, post: Post | None = None) -> TokenCalibration:
    """Measure the server's tokenizer: ``/tokenize`` first, then usage counts, then a recorded heuristic.

    ``post`` answers the requests instead of HTTP (a server inside this process: the virtual clock's simulator).
    Never raises for server trouble: the fallback says in ``note`` what failed (also when ``cancel`` was set).
    """
    root = server_root(base_url)
    problems: list[str] = []
    client = post or _poster(timeout_s, cancel)
    try:
        calib, _ = _fit(_count_tokenize, served_model, client, root)
        return calib
    except FetchCancelled:
        return HEURISTIC.model_copy(update={"note": HEURISTIC_NOTE + "; calibration interrupted"})
    except (FetchError, ValueError, KeyError, TypeError, AttributeError) as exc:
        problems.append(f"/tokenize: {type(exc).__name__}: {exc}")
    try:
        calib, _ = _fit(_count_usage, served_model, client, root)
        return calib.model_copy(update={"method": "usage", "note": "no /tokenize; measured from "
                                        "usage.prompt_tokens (" + problems[0][:160] + ")"})
    except FetchCancelled:
        problems.append("usage: interrupted")
    except (FetchError, ValueError, KeyError, TypeError, AttributeError) as exc:
        problems.append(f"usage: {type(exc).__name__}: {exc}")
    return HEURISTIC.model_copy(update={"note": HEURISTIC_NOTE + "; " + "; ".join(p[:160] for p in problems)})
