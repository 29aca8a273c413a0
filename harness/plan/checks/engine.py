"""Checks on the engine settings: pinned images, weight offload mistaken for KV offload, extra_args, lengths."""

from __future__ import annotations

from harness.config.scenario import Scenario
from harness.engines.trtllm import advertised_model_name
from harness.plan.checks.flags import check_managed_flags, vllm_name
from harness.schema.summary import CheckItem

UNPINNED_TAGS = frozenset({"latest", "main", "nightly", "dev", "stable", "edge"})
WEIGHT_OFFLOAD_FLAGS = ("--cpu-offload-gb", "--cpu_offload_gb")


def image_tag(image: str) -> str | None:
    """The tag of an image reference (None when untagged); a digest reference returns ``@sha256:...``."""
    if "@" in image:
        return image[image.index("@"):]
    last = image.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


_EXAMPLE_TAG = {"vllm": "v0.32.0", "trtllm": "1.0.0", "sim": "0.1.0"}


def _pin_example(image: str, engine_kind: str) -> str:
    repo = image.split("@", 1)[0]
    last = repo.rsplit("/", 1)[-1]
    if ":" in last:
        repo = repo[: len(repo) - len(last)] + last.split(":", 1)[0]
    return f"{repo}:{_EXAMPLE_TAG.get(engine_kind, '1.2.3')} or {repo}@sha256:<digest>"


def check_pinned_image(scenario: Scenario, allow_unpinned: bool) -> list[CheckItem]:
    """A tag like ``latest`` or no tag is an error unless allowed (``--allow-unpinned`` or checks.allow_unpinned)."""
    image = scenario.engine.image
    if image is None:
        if scenario.engine.effective_launcher == "docker":
            return [CheckItem(name="pinned-image", level="error", message="engine.image is required for docker "
                              f"(e.g. {_pin_example('vllm/vllm-openai', scenario.engine.kind)})")]
        return [CheckItem(name="pinned-image", level="ok", message="local process; no image")]
    tag = image_tag(image)
    allowed = allow_unpinned or scenario.checks.allow_unpinned
    if tag is None or tag in UNPINNED_TAGS:
        what = "has no tag (Docker reads that as 'latest')" if tag is None else f"uses the moving tag {tag!r}"
        level = "warn" if allowed else "error"
        how = ("allowed by --allow-unpinned / checks.allow_unpinned" if allowed else
               "or pass --allow-unpinned / set checks.allow_unpinned: true to accept it")
        return [CheckItem(name="pinned-image", level=level,
                          message=f"engine.image {image!r} {what}; pin a version, e.g. "
                          f"{_pin_example(image, scenario.engine.kind)}, so every arm and every rerun runs the same "
                          f"build ({how})")]
    digest = scenario.engine.image_digest
    how_pinned = "by digest" if tag.startswith("@") else f"to tag {tag}"
    return [CheckItem(name="pinned-image", level="ok",
                      message=f"engine.image {image} is pinned {how_pinned}" + (
                          f"; expected digest {digest}" if digest else "; its digest is recorded at launch"))]


def _names_weight_offload(token: str) -> bool:
    """``--cpu-offload-gb`` as vLLM's parser reads it: exactly, with underscores, or by an unambiguous abbreviation
    (``--cpu-offload-g``; ``--cpu-offload`` alone is ambiguous with ``--cpu-offload-params`` and vLLM refuses it)."""
    name = vllm_name(token)
    return name in WEIGHT_OFFLOAD_FLAGS or (name.startswith("--cpu-offload-g") and "--cpu-offload-gb".startswith(name))


def check_weight_offload(scenario: Scenario) -> list[CheckItem]:
    """``--cpu-offload-gb`` offloads model WEIGHTS, not KV cache: an error unless explicitly allowed."""
    hits: list[str] = []
    if any(_names_weight_offload(a) for a in scenario.engine.extra_args):
        hits.append("engine.extra_args")
    for i, arm in enumerate(scenario.arms):
        extra = arm.engine.get("extra_args") or []
        if isinstance(extra, list) and any(_names_weight_offload(str(a)) for a in extra):
            hits.append(f"arms[{i}].engine.extra_args")
    if not hits:
        return [CheckItem(name="weight-offload", level="ok", message="no model-weight offload configured")]
    level = "warn" if scenario.checks.allow_weight_offload else "error"
    return [CheckItem(name="weight-offload", level=level,
                      message=f"{', '.join(hits)}: --cpu-offload-gb offloads model WEIGHTS to CPU (per GPU) and adds "
                      "CPU-GPU traffic on every forward pass; it does not add KV-cache capacity. For KV offload use "
                      "offload kind vllm-native (--kv-offloading-size) or vllm-connector"
                      + (" (allowed by checks.allow_weight_offload)" if level == "warn" else
                         "; set checks.allow_weight_offload: true if you really mean it"))]


def _longest(scenario: Scenario, index: int) -> tuple[int, str]:
    """The longest prompt a class can send (a session's last turn carries its history), and why."""
    cls = scenario.workload.classes[index]
    reuse = scenario.workload.reuse
    worst, why = cls.prompt_tokens.max, f"up to {cls.prompt_tokens.max} prompt"
    if cls.reuse == "session" and reuse.sessions is not None:
        turns = reuse.sessions.turns
        system = reuse.system_prompts.tokens if reuse.system_prompts is not None else 0
        total = system + turns * cls.prompt_tokens.max + (turns - 1) * cls.output_tokens.max
        if total > worst:
            worst, why = total, f"a {turns}-turn session's last turn of up to {total} prompt (history included)"
    return worst, why


def check_lengths(scenario: Scenario) -> list[CheckItem]:
    """Planned prompt + output lengths must fit ``max_model_len`` when it is set."""
    limit = scenario.engine.max_model_len
    if scenario.workload.trace is not None and not scenario.workload.classes:
        return [CheckItem(name="lengths", level="ok", message="trace workload: request lengths are checked "
                          "against max_model_len when the trace is read")]
    if limit is None:
        return [CheckItem(name="lengths", level="ok", message="engine.max_model_len is not set: the engine's own "
                          "limit applies and request lengths are not checked here")]
    out: list[CheckItem] = []
    for i, cls in enumerate(scenario.workload.classes):
        prompt, why = _longest(scenario, i)
        need = prompt + cls.output_tokens.max
        if need > limit:
            out.append(CheckItem(name="lengths", level="error",
                                 message=f"workload.classes[{i}] ({cls.name}): {why} + {cls.output_tokens.max} "
                                 f"output tokens = {need} exceeds engine.max_model_len {limit}; lower "
                                 f"workload.classes[{i}].prompt_tokens.max / output_tokens.max or raise "
                                 "engine.max_model_len"))
    if not out:
        out.append(CheckItem(name="lengths", level="ok", message=f"all request classes fit max_model_len {limit}"))
    return out


def check_extra_args(scenario: Scenario) -> list[CheckItem]:
    """No flag the harness renders itself (offload flags would reach the baseline too), no ``--config``, no repeats:
    see :mod:`harness.plan.checks.flags`."""
    return check_managed_flags(scenario)


def check_served_name(scenario: Scenario) -> list[CheckItem]:
    """trtllm-serve cannot rename the model it serves: a ``served_model_name`` there is ignored, so say so."""
    engine = scenario.engine
    if engine.kind != "trtllm" or engine.served_model_name is None:
        return []
    return [CheckItem(name="served-name", level="warn",
                      message=f"engine.served_model_name {engine.served_model_name!r} is ignored for TensorRT-LLM: "
                      "trtllm-serve has no option to rename the model; requests use "
                      f"{advertised_model_name(engine.model)!r} (derived from engine.model)")]
