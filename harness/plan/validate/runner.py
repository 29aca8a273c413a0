"""Run the in-engine validation for a scenario: choose where (image or interpreter), run once for all arms, parse.

Where, in order: ``ValidateOptions.python`` (``--validate-python`` / ``HARNESS_VALIDATE_PYTHON``) for every arm; a
local process's own interpreter (``HARNESS_VLLM_PYTHON``, ``HARNESS_TRTLLM_PYTHON``, else the python beside
``trtllm-serve`` on PATH); for a docker launch, the pinned image through the ``docker`` CLI, if the image is present
(never pulled by ``plan``; ``run`` pulls it, as the launch would). The simulator has nothing to validate against.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.config.engine import EngineSpec
from harness.config.scenario import Scenario
from harness.config.secret_values import scenario_secret_values
from harness.engines import build_launch_spec
from harness.engines.spec import LaunchSpec
from harness.plan.checks.blocks import local_model_config
from harness.plan.validate.base import not_checked, parse_output, script_text
from harness.plan.validate.engines import SCRIPTS, request_item
from harness.plan.validate.guards import resolved_checks
from harness.schema.summary import CheckItem
from harness.schema.validation import ArmValidation, unvalidated
from harness.secrets.redact import Redactor, secret_values

CONTAINER_CACHE = "/root/.cache/huggingface"
CONTAINER_MODEL = "/harness/model-config"
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}


@dataclass
class ValidateOptions:
    """How to validate: an interpreter for every arm, a local model directory, time bound, pulling."""

    python: str | None = None
    model_dir: str | None = None
    timeout_s: float = 600.0
    pull: bool = False
    docker: str = "docker"

    @classmethod
    def from_env(cls, python: str | None = None, model_dir: str | None = None, **kw: object) -> ValidateOptions:
        """Options with ``HARNESS_VALIDATE_PYTHON`` as the default interpreter."""
        return cls(python=python or os.environ.get("HARNESS_VALIDATE_PYTHON") or None, model_dir=model_dir,
                   **kw)  # type: ignore[arg-type]


def local_python(engine: EngineSpec) -> str | None:
    """The interpreter a local process of this engine runs in."""
    if engine.kind == "vllm":
        return os.environ.get("HARNESS_VLLM_PYTHON") or sys.executable
    found = os.environ.get("HARNESS_TRTLLM_PYTHON")
    if found:
        return found
    serve = shutil.which("trtllm-serve")
    return str(Path(serve).with_name("python3")) if serve else None


def _model_for(engine: EngineSpec, opts: ValidateOptions, *, docker: bool) -> tuple[str | None, list[str], str | None]:
    """(model to validate with, notes, reason it cannot be checked)."""
    if opts.model_dir:
        shown = CONTAINER_MODEL if docker else opts.model_dir
        return shown, [f"validated with --model {opts.model_dir} (a local copy of the model's config) in place of "
                       f"{engine.model}"], None
    if docker:
        if engine.model_cache_dir or engine.model.startswith("/"):
            return None, [], None
        return None, [], (f"model {engine.model}: no engine.model_cache_dir to mount, so the image cannot read its "
                          "config.json; set it or give --validate-model DIR")
    path = local_model_config(engine.model, engine.model_cache_dir)
    if path is None:
        return None, [], (f"model {engine.model}: config.json not on this machine; give --validate-model DIR (a "
                          "directory with the model's config.json) or set engine.model_cache_dir")
    if (Path(engine.model).expanduser() / "config.json").exists():
        return None, [], None  # a local model directory: vLLM reads it as given
    return str(path.parent), [f"validated with --model {path.parent} (the Hugging Face cache snapshot of "
                              f"{engine.model})"], None


def _command(engine: EngineSpec, target: str, docker: bool, opts: ValidateOptions, script: str, *,
             gpus: bool = True) -> list[str]:
    """The check's command: the interpreter, or ``docker run`` of the pinned image with the arm's GPUs (vLLM's CUDA
    build detects no platform without them and cannot build its parser)."""
    if not docker:
        return [target, "-c", script]
    cmd = [opts.docker, "run", "--rm", "-i", "--network", "none", "--entrypoint", "python3"]
    if gpus and engine.gpus:
        cmd += ["--gpus", engine.gpus]
    for name in sorted({**engine.env, **OFFLINE_ENV}):
        cmd += ["-e", name]  # values travel in the environment, never on the command line
    if engine.model_cache_dir:
        cmd += ["-v", f"{engine.model_cache_dir}:{CONTAINER_CACHE}:ro"]
    if opts.model_dir:
        cmd += ["-v", f"{Path(opts.model_dir).resolve()}:{CONTAINER_MODEL}:ro"]
    return [*cmd, target, "-c", script]


def _image_ready(engine: EngineSpec, opts: ValidateOptions) -> str | None:
    """None when the image is here (pulled if allowed), else why not."""
    if shutil.which(opts.docker) is None:
        return f"no docker CLI ({opts.docker}) on this machine"
    image = engine.image or ""
    probe = subprocess.run([opts.docker, "image", "inspect", image], capture_output=True, text=True, check=False)
    if probe.returncode == 0:
        return None
    if "Cannot connect" in probe.stderr or "daemon" in probe.stderr.lower():
        return f"docker daemon not reachable ({' '.join(probe.stderr.split())[:200]})"
    if opts.pull:
        pulled = subprocess.run([opts.docker, "pull", image], capture_output=True, text=True, check=False)
        if pulled.returncode == 0:
            return None
        return f"image {image} could not be pulled: {' '.join(pulled.stderr.split())[:300]}"
    return f"image {image} is not present locally (docker pull {image}, or give --validate-python)"


def validate_scenario(scenario: Scenario, opts: ValidateOptions | None = None) -> list[ArmValidation]:
    """One result per arm (empty for the simulator)."""
    opts = opts or ValidateOptions.from_env()
    engine = scenario.engine
    if engine.kind not in SCRIPTS or engine.effective_launcher == "external":
        return []  # the simulator has no code of its own; an external server's live config is checked instead
    specs: list[tuple[LaunchSpec, EngineSpec]] = []
    for arm in scenario.arms:
        arm_engine = scenario.engine_for(arm)
        try:
            specs.append((build_launch_spec(arm_engine, arm), arm_engine))
        except ValueError:
            continue  # the plan reports it as a launch-spec error
    names = [s.arm for s, _ in specs]
    docker = opts.python is None and engine.effective_launcher == "docker"
    target = engine.image if docker else (opts.python or local_python(engine))
    where = f"image {target}" if docker else f"interpreter {target}"
    if not target:
        return not_checked(names, f"no {engine.kind} interpreter found (set HARNESS_TRTLLM_PYTHON or give "
                           "--validate-python)", "nowhere")
    why = _image_ready(engine, opts) if docker else (None if Path(target).exists() or shutil.which(target)
                                                     else f"interpreter {target} does not exist")
    model, notes, cannot = _model_for(engine, opts, docker=docker)
    if why or cannot:
        return not_checked(names, why or cannot or "", where)
    request = {"arms": [request_item(s, model, e) for s, e in specs]}
    env = {**os.environ, **engine.env, **OFFLINE_ENV}
    if engine.model_cache_dir and not docker:
        env["HF_HOME"] = engine.model_cache_dir
    redact = Redactor([*secret_values(engine.env), *scenario_secret_values(scenario)])  # flag values too
    script = script_text(SCRIPTS[engine.kind])

    def check(gpus: bool) -> subprocess.CompletedProcess[str]:
        return subprocess.run(_command(engine, target, docker, opts, script, gpus=gpus), input=json.dumps(request),
                              capture_output=True, text=True, env=env, timeout=opts.timeout_s, check=False)

    try:
        proc = check(gpus=True)
        if docker and engine.gpus and proc.returncode != 0 and _no_gpu_runtime(proc.stderr):
            notes = [*notes, f"docker could not give the check the GPUs (--gpus {engine.gpus}: "
                     f"{' '.join(proc.stderr.split())[:200]}); it ran without them"]
            proc = check(gpus=False)
    except subprocess.TimeoutExpired:
        return not_checked(names, f"the check did not finish within {opts.timeout_s:g} s", where)
    except OSError as exc:
        return not_checked(names, f"cannot run {target}: {exc.strerror or exc}", where)
    return parse_output(proc.stdout, proc.stderr, names, where=where, redact=redact,
                        notes={n: notes for n in names})


def _no_gpu_runtime(stderr: str) -> bool:
    """docker's words when ``--gpus`` has no runtime behind it (no NVIDIA container toolkit, no GPU)."""
    text = stderr.lower()
    return "could not select device driver" in text or "nvidia-container" in text or "unknown flag: --gpus" in text


def validation_checks(results: list[ArmValidation]) -> list[CheckItem]:
    """Check items for the plan/run: rejected = error, not checked = warn, ok (and ok-up-to-platform) = ok."""
    out = []
    for r in results:
        note = f" [{'; '.join(r.notes)}]" if r.notes else ""
        ver = f" {r.engine_version}" if r.engine_version else ""
        if r.status == "ok":
            out.append(CheckItem(name="engine-validation", level="ok", arm=r.arm,
                                 message=f"accepted by the engine's own code{ver} ({r.where}): {r.message}{note}"))
        elif r.status == "platform":
            out.append(CheckItem(name="engine-validation", level="ok", arm=r.arm,
                                 message=f"ok up to the platform{ver} ({r.where}): accepted through "
                                 f"the offloading spec; this platform then stops with: {r.message}{note}"))
        elif r.status == "rejected":
            out.append(CheckItem(name="engine-validation", level="error", arm=r.arm,
                                 message=f"rejected by the engine{ver} ({r.where}) at {r.stage}: {r.message}{note}"))
        else:
            out.append(CheckItem(name="engine-validation", level="warn", arm=r.arm,
                                 message=f"not checked ({r.where}): {r.message}{note}"))
    return out


def incomplete_item(results: list[ArmValidation]) -> CheckItem | None:
    """One loud item when some arm could not be validated (``harness run --require-validation`` stops on it)."""
    missing = unvalidated(results)
    if not missing:
        return None
    names = ", ".join(r.arm for r in missing)
    return CheckItem(name="validation-incomplete", level="warn",
                     message=f"NOT VALIDATED: {len(missing)} of {len(results)} arm(s) ({names}) could not be checked "
                     f"by the engine's own code ({missing[0].message[:300]}); what the engine will resolve is "
                     "unknown, and `harness run --require-validation` (the default of `make benchmark`) refuses to "
                     "start")


def validation_items(scenario: Scenario, results: list[ArmValidation]) -> list[CheckItem]:
    """Every check item of a validation: per-arm verdicts, the guards on what was resolved, the loud summary."""
    items = validation_checks(results) + resolved_checks(scenario, results)
    loud = incomplete_item(results)
    return [loud, *items] if loud is not None else items
