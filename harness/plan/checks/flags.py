"""``engine.extra_args`` may not override what the harness renders itself (check ``extra-args``).

The harness renders the flags its checks and records rely on (``--max-model-len``, ``--kv-offloading-size``, ...) and
appends ``engine.extra_args`` (or an arm's ``arms[i].engine.extra_args``) after them. vLLM 0.32's
``FlexibleArgumentParser`` reads ``_`` in an option name as ``-``, accepts an unambiguous abbreviation (argparse
``allow_abbrev``), knows aliases (``-tp``, ``--device-memory-utilization``) and negations (``--no-...``), merges the
dotted JSON form ``--kv-transfer-config.KEY VALUE`` into its flag, and keeps the LAST repeat of a flag. So
``--kv-offloading-si 8`` in ``engine.extra_args`` gives the gpu-only baseline an 8 GiB CPU tier and ``--max-model-len
8192`` runs a server the harness's checks believe takes 32768 tokens. Every token that names a managed flag
(:data:`harness.engines.vllm.MANAGED_FLAGS`) in any of those ways is an error naming the flag and the scenario field to
use; ``--config`` (a YAML file of arguments, which can set any flag) is refused; and a flag given twice within one
extra_args list is an error, since the earlier value is silently dropped.

trtllm-serve (click) takes neither abbreviations nor ``_``/``-`` variants, but also keeps the last repeat: a flag the
TensorRT-LLM adapter renders (:data:`TRTLLM_MANAGED`, kept equal to ``harness/engines/trtllm.py`` by a unit test) is
refused the same way. For the simulator (click too) the KV-offload flags and repeats are checked.

A token starting with ``-`` is read as a flag, as argparse does (a negative number such as ``-1`` is a value); the
values that follow flags are never echoed (they may be secrets).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from harness.config.scenario import Scenario
from harness.engines.trtllm import CONFIG_FLAG as TRTLLM_CONFIG_FLAG
from harness.engines.vllm import MANAGED_BY_OPTION, OFFLOAD_FIELD, ManagedFlag
from harness.schema.summary import CheckItem

CHECK = "extra-args"
How = Literal["exact", "spelling", "alias", "negation", "dotted", "abbreviation", "ambiguous"]
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's own test: such a token is a value

# Flags harness/engines/trtllm.py renders for trtllm-serve (serve_args), and the scenario field behind each.
TRTLLM_OFFLOAD_FIELD = "arms[].offload (kind trtllm)"
TRTLLM_MANAGED: dict[str, str] = {
    "--host": "engine.host",
    "--port": "engine.port",
    "--backend": "",
    "--tp_size": "engine.tensor_parallel_size",
    "--max_batch_size": "engine.max_num_seqs",
    "--max_num_tokens": "engine.max_num_batched_tokens",
    "--max_seq_len": "engine.max_model_len",
    TRTLLM_CONFIG_FLAG: TRTLLM_OFFLOAD_FIELD,
    "--config": TRTLLM_OFFLOAD_FIELD,  # the alias of --extra_llm_api_options (TensorRT-LLM 1.3, PR #9104)
    # not rendered, but it sets kv_cache_config.free_gpu_memory_fraction, which the rendered YAML sets per arm
    "--kv_cache_free_gpu_memory_fraction": "arms[].offload.free_gpu_memory_fraction",
}
TRTLLM_NOTES = {
    "--backend": "the harness always runs the pytorch backend (--backend pytorch)",
    "--kv_cache_free_gpu_memory_fraction": "it sets the same kv_cache_config.free_gpu_memory_fraction as the YAML the "
                                           "harness renders per arm, so two values would compete",
}


@dataclass(frozen=True)
class Resolved:
    """What a command-line token names among the managed vLLM flags."""

    written: str                    # the option part of the token as written (no ``=value``)
    how: How
    flags: tuple[ManagedFlag, ...]  # one flag, or several for an ambiguous abbreviation
    matched: tuple[str, ...]        # the option strings it names (one per flag)

    @property
    def flag(self) -> ManagedFlag:
        """The (first) managed flag the token names."""
        return self.flags[0]


def is_flag(token: str) -> bool:
    """A token argparse reads as an option (``-x``, ``--x``), not a value (``-1``, ``-``, plain text)."""
    return token.startswith("-") and token != "-" and not _NEGATIVE_NUMBER.match(token)


def option_part(token: str) -> str:
    """The option as written, without its ``=value`` (which is never echoed)."""
    return token.split("=", 1)[0]


def vllm_name(token: str) -> str:
    """The option name vLLM's parser looks up for a flag token: no ``=value``, no dotted ``.KEY`` suffix, and (for a
    ``--`` option) ``_`` read as ``-`` (``--max_model_len=8192`` -> ``--max-model-len``)."""
    head = option_part(token).split(".", 1)[0]
    return "--" + head[2:].replace("_", "-") if head.startswith("--") else head


def resolve_vllm(token: str) -> Resolved | None:
    """The managed vLLM flag(s) a flag token names -- exactly, with underscores, by alias, as a negation, in the
    dotted JSON form, or by an (ambiguous) argparse abbreviation -- or None when it names none."""
    if not is_flag(token) or token == "--":
        return None
    written = option_part(token)
    name = vllm_name(token)
    exact = MANAGED_BY_OPTION.get(name)
    if exact is not None:
        how: How
        if "." in written:
            how = "dotted"
        elif name != exact.flag:
            how = "negation" if name == "--no-" + exact.flag[2:] else "alias"
        elif written != name:
            how = "spelling"
        else:
            how = "exact"
        return Resolved(written, how, (exact,), (name,))
    if len(name) < 2 or name == "--":
        return None
    hits = [(o, f) for o, f in MANAGED_BY_OPTION.items() if o.startswith(name)]
    flags: list[ManagedFlag] = []
    matched: list[str] = []
    for option, flag in hits:
        if flag not in flags:
            flags.append(flag)
            matched.append(option)
    if not flags:
        return None
    return Resolved(written, "abbreviation" if len(flags) == 1 else "ambiguous", tuple(flags), tuple(matched))


def _quoted(text: str) -> str:
    return json.dumps(text)  # quotes, and escapes anything that could disturb a terminal


def _and(items: Iterable[str]) -> str:
    words = list(items)
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _offload_effect(arm_index: int | None, arm_name: str | None) -> tuple[str, str]:
    """What an offload flag would do (in ``engine.extra_args``, or in arm ``arm_index``'s), and where the tier belongs
    instead."""
    if arm_index is None:
        return "it would change every arm's offload, the gpu-only baseline included", OFFLOAD_FIELD
    where = f"arms[{arm_index}].offload"
    if arm_index == 0:
        return f"it would give arm {arm_name!r}, the gpu-only baseline, KV offload its {where} does not have", where
    return f"it would override the offload of arm {arm_name!r} set in {where}", where


def _why(res: Resolved) -> str:
    """Why a repeat of the flag takes over, in the words of how it was written."""
    flag = res.flag
    if res.how == "abbreviation":
        return "vLLM accepts abbreviations and the last repeat wins"
    if res.how == "spelling":
        return "vLLM reads _ as - in option names and the last repeat wins"
    if res.how == "alias":
        return "vLLM takes either name and the last repeat wins"
    if res.how == "negation":
        return f"the last of {flag.flag} / --no-{flag.flag[2:]} wins"
    if res.how == "dotted":
        return f"vLLM merges {flag.flag}.KEY into {flag.flag}, and the last one wins"
    return "extra_args come after the harness's own flags and the last repeat wins"


def _what(res: Resolved) -> str:
    """``"--x" is an abbreviation of --y`` and the like."""
    token = _quoted(res.written)
    flag, matched = res.flag, res.matched[0]
    target = matched if matched == flag.flag else f"{matched} ({_relation(matched, flag)} of {flag.flag})"
    if res.how == "abbreviation":
        return f"{token} is an abbreviation of {target}"
    if res.how == "spelling":
        return f"{token} is {flag.flag} spelled with underscores"
    if res.how in ("alias", "negation"):
        return f"{token} is {_relation(matched, flag)} of {flag.flag}"
    if res.how == "dotted":
        return f"{token} sets a key of {flag.flag} (vLLM's dotted JSON form)"
    return f"{token} is {flag.flag}"


def _relation(option: str, flag: ManagedFlag) -> str:
    return "the negation" if option == "--no-" + flag.flag[2:] else "vLLM's alias"


def vllm_message(res: Resolved, source: str, arm_index: int | None = None, arm_name: str | None = None) -> str:
    """The error for one token of ``source`` that names a managed vLLM flag."""
    if res.how == "ambiguous":
        fields = _and(dict.fromkeys(f.field or f.flag for f in res.flags))
        return (f"{source}: {_quoted(res.written)} is an ambiguous abbreviation of {_and(res.matched)}, flags the "
                f"harness sets itself (from {fields}); vLLM refuses an ambiguous abbreviation, so the server would not "
                "start: spell out the flag you mean, and set the harness's own through those fields")
    flag = res.flag
    if flag.dest == "config":
        return (f"{source}: {_quoted(res.written)} is refused: {flag.note}; remove it and put the settings in the "
                "scenario (engine fields, arms[].offload) or, for flags the harness does not manage, in extra_args")
    head = f"{source}: {_what(res)}"
    if not flag.field:
        return f"{head}, which the harness renders itself ({_why(res)}); remove it: {flag.note}"
    if flag.offload:
        effect, where = _offload_effect(arm_index, arm_name)
        return (f"{head}, which the harness sets from {OFFLOAD_FIELD} ({_why(res)}, so {effect}); remove it and set "
                f"the tier in {where}")
    return (f"{head}, which the harness sets from {flag.field} ({_why(res)}, so the server would run with a value "
            f"other than {flag.field}, the one the harness's checks and records assume); remove it and set "
            f"{flag.field}")


def trtllm_message(token: str, source: str) -> str | None:
    """The error for a token naming a flag the TensorRT-LLM adapter renders itself (None when it names none)."""
    written = option_part(token)
    if written not in TRTLLM_MANAGED:
        return None
    field = TRTLLM_MANAGED[written]
    head = f"{source}: {_quoted(written)} is a trtllm-serve flag the harness renders itself"
    why = "trtllm-serve keeps the last repeat"
    if written in (TRTLLM_CONFIG_FLAG, "--config"):
        return (f"{head} (it points {TRTLLM_CONFIG_FLAG} at the extra-options YAML written per arm from "
                f"{TRTLLM_OFFLOAD_FIELD}; {why}, so another file would replace it, the arm's kv_cache_config "
                f"included); remove it and set the kv_cache_config fields in {TRTLLM_OFFLOAD_FIELD}")
    if written == "--kv_cache_free_gpu_memory_fraction":
        return (f"{source}: {_quoted(written)} sets kv_cache_config.free_gpu_memory_fraction, which the harness "
                f"renders per arm from {field} ({TRTLLM_NOTES[written]}); remove it and set {field}")
    if not field:
        return f"{head} ({why}); remove it: {TRTLLM_NOTES.get(written, 'no scenario field changes it')}"
    return (f"{head} from {field} ({why}, so the server would run with a value other than {field}, the one the "
            f"harness's checks and records assume); remove it and set {field}")


def _repeat_key(token: str, kind: str) -> str | None:
    """The setting a flag token writes, for spotting repeats (None: not a flag, or a list append ``--x.key+``)."""
    if not is_flag(token) or token == "--":
        return None
    written = option_part(token)
    if written.endswith("+"):
        return None  # vLLM's dotted list append (--json-arg.key+ v) adds to the list, nothing is dropped
    if kind != "vllm":
        return written
    resolved = resolve_vllm(token)
    if resolved is not None and resolved.how != "dotted" and len(resolved.flags) == 1:
        return resolved.flag.flag
    name = vllm_name(token)
    rest = written.split(".", 1)[1] if "." in written else ""
    if name.startswith("--no-"):
        name = "--" + name[5:]  # --no-X is the negation of --X (vLLM's BooleanOptionalAction): the same setting
    return f"{name}.{rest}" if rest else name


def repeated_flags(args: list[str], source: str, kind: str) -> list[str]:
    """One message per setting given more than once in ``args`` (the earlier values are dropped silently)."""
    seen: dict[str, list[str]] = {}
    for token in args:
        if token == "--":
            break
        key = _repeat_key(token, kind)
        if key is not None:
            seen.setdefault(key, []).append(option_part(token) + ("=..." if "=" in token else ""))
    engine = "vLLM" if kind == "vllm" else ("trtllm-serve" if kind == "trtllm" else "the simulator")
    return [f"{source}: {key} is given {len(written)} times ({_and(_quoted(w) for w in written)}); {engine} "
            "keeps the last and silently drops the earlier; keep one"
            for key, written in seen.items() if len(written) > 1]


def extra_args_errors(args: list[str], kind: str, source: str, arm_index: int | None = None,
                      arm_name: str | None = None) -> list[str]:
    """Every problem with one extra_args list of an engine of ``kind``."""
    out: list[str] = []
    for token in args:
        if token == "--":
            break
        if kind == "trtllm":
            msg = trtllm_message(token, source) if is_flag(token) else None
        else:
            res = resolve_vllm(token)
            if kind == "sim" and res is not None and not (res.flag.offload and res.how in ("exact", "spelling")):
                res = None  # the simulator (click) takes no abbreviations or aliases; its offload flags matter here
            msg = vllm_message(res, source, arm_index, arm_name) if res is not None else None
        if msg is not None:
            out.append(msg)
    return out + repeated_flags(args, source, kind)


def check_managed_flags(scenario: Scenario) -> list[CheckItem]:
    """``engine.extra_args`` and each ``arms[i].engine.extra_args``: no managed flag, no ``--config``, no repeats."""
    messages = extra_args_errors(list(scenario.engine.extra_args), scenario.engine.kind, "engine.extra_args")
    for i, arm in enumerate(scenario.arms):
        if "extra_args" not in arm.engine:
            continue
        engine = scenario.engine_for(arm)
        messages += extra_args_errors(list(engine.extra_args), engine.kind, f"arms[{i}].engine.extra_args", i,
                                      arm.name)
    if messages:
        return [CheckItem(name=CHECK, level="error", message=m) for m in messages]
    return [CheckItem(name=CHECK, level="ok", message="engine.extra_args set no KV offload flag")]
