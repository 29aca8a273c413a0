"""The ``engine`` section (and each arm's ``engine`` overrides) mapped onto the simulator, field by field.

Every field of :class:`harness.config.engine.EngineSpec` is in exactly one of these groups (a test holds the table
to the model, so a new field cannot slip through unmapped):

* :data:`KEPT` — what the simulator models the same way the engine does: the model and its served name, the memory
  share, the length and batching limits, prefix caching, the readiness timeout, a simulator scenario's noise;
* :data:`REPLACED` — set by the prediction: ``kind: sim``, ``launcher: process``, ``sim_profile`` (or
  ``sim_profile_file``), ``sim_flavor`` from the engine's kind, ``sim_clock``, loopback ``host`` and a free ``port``;
* :data:`DROPPED` — what only a real server's launch reads (image, GPUs, shared memory, model cache, the release);
* checked, then dropped or refused: ``tensor_parallel_size`` (1 only: the simulator models one GPU),
  ``extra_args`` (only the flags of :data:`HARMLESS_FLAGS`, which change nothing the simulator models),
  ``env`` (the engines' own settings, ``VLLM_*`` / ``TRTLLM_*`` / ``TLLM_*``, are refused but for the logging ones in
  :data:`HARMLESS_ENV`), ``sim_args`` (simulator faults and knobs are not part of a prediction).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.predict.refusal import PredictRefused

KEPT = frozenset({"model", "served_model_name", "gpu_memory_utilization", "max_model_len", "max_num_seqs",
                  "max_num_batched_tokens", "enable_prefix_caching", "readiness_timeout_s", "sim_noise"})
REPLACED = frozenset({"kind", "launcher", "sim_profile", "sim_profile_file", "sim_flavor", "sim_clock", "host",
                      "port", "sim_time_scale"})
DROPPED = frozenset({"image", "image_digest", "gpus", "shm_size", "ipc", "version", "model_cache_dir"})
CHECKED = frozenset({"tensor_parallel_size", "extra_args", "env", "sim_args"})

# Flags that change nothing the simulator models (logging, the API surface, where weights come from): dropped with a
# note. Value: whether the flag takes a value. Any other flag is refused, naming it: it may change the cache, the
# batching or the kernels (--kv-cache-dtype, --block-size, --enable-chunked-prefill, --quantization, ...).
HARMLESS_FLAGS: dict[str, bool] = {
    "--disable-log-requests": False, "--enable-log-requests": False, "--disable-log-stats": False,
    "--disable-uvicorn-access-log": False, "--uvicorn-log-level": True, "--enable-prompt-tokens-details": False,
    "--trust-remote-code": False, "--max-log-len": True, "--download-dir": True, "--tokenizer": True,
    "--chat-template": True, "--response-role": True, "--api-key": True, "--seed": True,
    "--log_level": True, "--trust_remote_code": False,  # trtllm-serve spellings
}
HARMLESS_ENV = frozenset({"VLLM_LOGGING_LEVEL", "VLLM_CONFIGURE_LOGGING", "VLLM_LOGGING_CONFIG_PATH",
                          "VLLM_NO_USAGE_STATS", "VLLM_DO_NOT_TRACK", "VLLM_CACHE_ROOT", "VLLM_CONFIG_ROOT",
                          "VLLM_ASSETS_CACHE", "VLLM_API_KEY", "TLLM_LOG_LEVEL"})
ENGINE_ENV_PREFIXES = ("VLLM_", "TRTLLM_", "TLLM_")

Note = Callable[[str], None]


def _harmless_args(args: list[Any], where: str) -> list[str]:
    """The flags of ``args`` (all harmless, else a refusal naming the first that is not)."""
    flags: list[str] = []
    i = 0
    while i < len(args):
        arg = str(args[i])
        flag, eq, _value = arg.partition("=")
        takes = HARMLESS_FLAGS.get(flag)
        if takes is None:
            raise PredictRefused(f"{where}[{i}]", f"{arg[:80]!r} is an engine flag the simulator does not model (it "
                                 "may change the cache, the batching or the kernels, and a prediction would "
                                 "silently leave it out); remove it to predict. Flags that change nothing modelled "
                                 f"are dropped: {', '.join(sorted(HARMLESS_FLAGS))}")
        flags.append(flag)
        i += 1 if eq or not takes else 2
    return flags


def _check_env(env: dict[str, Any], where: str) -> None:
    for name in sorted(env):
        if name.startswith(ENGINE_ENV_PREFIXES) and name not in HARMLESS_ENV:
            raise PredictRefused(f"{where}.{name}", "an engine setting in the environment, which the simulator does "
                                 "not model (VLLM_USE_SIMPLE_KV_OFFLOAD, for one, swaps vLLM's offload connector); "
                                 f"remove it to predict (logging, cache-path and key ones are dropped: "
                                 f"{', '.join(sorted(HARMLESS_ENV))})")


def check_fields(fields: dict[str, Any], where: str, note: Note) -> dict[str, Any]:
    """Those of ``fields`` (an engine section or an arm's overrides, as written) the prediction keeps, after the
    checks; dropped ones are noted, what cannot be modelled is refused. ``where`` is the section's path."""
    kept: dict[str, Any] = {}
    for key, value in fields.items():
        path = f"{where}.{key}"
        if key == "tensor_parallel_size":
            if int(value) > 1:
                raise PredictRefused(path, f"{value}: the simulator models one GPU (its profiles have no tensor-"
                                     "parallel field), so a TP>1 server cannot be predicted today; predict TP 1 on a "
                                     "profile whose model fits one GPU (e.g. h100-llama3-70b-fp8: FP8 70B on one H100)")
        elif key == "launcher" and value == "external":
            raise PredictRefused(path, "external: a server you run has no simulated counterpart (its hardware, "
                                 "build and settings are not the harness's to model); predict with a scenario the "
                                 "harness launches (engine.launcher docker or process)")
        elif key == "extra_args" and value:
            note(f"{path}: {' '.join(_harmless_args(list(value), path))} dropped (no effect on what is modelled)")
        elif key == "sim_args" and value:
            raise PredictRefused(path, "simulator flags (faults, seeds, disk tails) are not part of a prediction of "
                                 "the profile's hardware; remove them")
        elif key == "env" and value:
            _check_env(dict(value), path)
            note(f"{path}: not passed (the simulator reads no engine environment; names: "
                 f"{', '.join(sorted(value))})")
        elif key in KEPT:
            kept[key] = value
        elif key in DROPPED and value is not None:
            note(f"{path}: {value!s:.80} dropped (the simulator runs inside the harness: no image, GPU or model "
                 "files)")
        elif key in REPLACED or key in DROPPED:
            pass  # set by the mapping (the profile, the flavour, the clock, the address), or an unset launch field
        elif key not in CHECKED:
            raise PredictRefused(path, "a field the prediction's mapping does not know (harness/predict/engine_map.py "
                                 "must say whether the simulator models it)")
    return kept
