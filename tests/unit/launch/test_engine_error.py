"""The root cause of a failed start, found in the engine's log (lines as vLLM 0.32.0 on the CPU writes them)."""

from __future__ import annotations

from pathlib import Path

from harness.launch.errors import engine_error, engine_error_in_file

W = "(Worker pid=18025) ERROR 11-29 13:06:09 [multiproc_executor.py:1063] "
VLLM_CPU_OFFLOAD = [
    "(APIServer pid=17688) WARNING 11-29 13:04:39 [system_utils.py:255] Found ulimit of 20000 and failed to "
    "automatically increase with error current limit exceeds maximum limit. This can cause fd limit errors like "
    "`OSError: [Errno 24] Too many open files`. Consider increasing with ulimit -n",
    "(Worker pid=18025) WARNING 11-29 13:05:32 [utils.py:597] Failed to create oneDNN linear, fallback to torch "
    "linear. Exception: could not create a primitive descriptor for the matmul primitive.",
    W + "Traceback (most recent call last):",
    W + '  File "/venv/lib/python3.11/site-packages/vllm/v1/kv_offload/cpu/spec.py", line 200, in get_worker',
    W + "    raise Exception(",
    W + "Exception: CPU Offloading is currently only supported on CUDA-alike and XPU GPUs",
    "(EngineCore pid=17841) ERROR 11-29 13:06:09 [core.py:1510] RuntimeError: Worker failed with error 'CPU "
    "Offloading is currently only supported on CUDA-alike and XPU GPUs', please check the stack trace above for "
    "the root cause",
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    "/usr/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: There appear to "
    "be 1 leaked shared_memory objects to clean up at shutdown",
]


def test_root_cause_not_warnings_or_wrappers() -> None:
    assert engine_error(VLLM_CPU_OFFLOAD) == (
        "Exception: CPU Offloading is currently only supported on CUDA-alike and XPU GPUs")


def test_connector_config_error_and_bare_traceback_end() -> None:
    lines = ["Traceback (most recent call last):", '  File "x.py", line 1, in <module>',
             "ValueError: cpu_bytes_to_use must be specified in kv_connector_extra_config"]
    assert engine_error(lines) == "ValueError: cpu_bytes_to_use must be specified in kv_connector_extra_config"
    assert engine_error(["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]) == (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")


def test_only_wrappers_give_the_wrapper_and_nothing_gives_none() -> None:
    assert engine_error(VLLM_CPU_OFFLOAD[-2:]) == VLLM_CPU_OFFLOAD[-2]
    assert engine_error(["INFO starting", "WARNING something: odd", "ready"]) is None
    assert engine_error([]) is None


def test_file_variant(tmp_path: Path) -> None:
    log = tmp_path / "arm.log"
    log.write_text("\n".join(VLLM_CPU_OFFLOAD) + "\n")
    assert engine_error_in_file(log) is not None
    assert engine_error_in_file(tmp_path / "missing.log") is None
