"""Checks on the engine settings: pinned images, weight offload mistaken for KV offload, lengths."""

from __future__ import annotations

from harness.config.scenario import Scenario
from harness.summary import CheckItem

UNPINNED_TAGS = frozenset({"latest", "main", "nightly", "dev", "stable", "edge"})
WEIGHT_OFFLOAD_FLAGS = ("--cpu-offload-gb", "--cpu_offload_gb")


def image_tag(image: str) -> str | None:
    """The tag of an image reference (None when untagged); a digest reference returns ``@sha256:...``."""
    if "@" in image:
        return image[image.index("@"):]
    last = image.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def check_pinned_image(scenario: Scenario, allow_unpinned: bool) -> list[CheckItem]:
    """A tag like ``latest`` or no tag is an error unless allowed."""
    image = scenario.engine.image
    if image is None:
        if scenario.engine.effective_launcher == "docker":
            return [CheckItem(name="pinned-image", level="error", message="engine.image is required for docker")]
        return [CheckItem(name="pinned-image", level="ok", message="local process; no image")]
    tag = image_tag(image)
    allowed = allow_unpinned or scenario.checks.allow_unpinned
    if tag is None or tag in UNPINNED_TAGS:
        what = "has no tag" if tag is None else f"uses the moving tag {tag!r}"
        level = "warn" if allowed else "error"
        return [CheckItem(name="pinned-image", level=level,
                          message=f"engine.image {image!r} {what}; pin a version (e.g. vllm/vllm-openai:v0.32.0) "
                          "so every arm and every rerun runs the same build" +
                          (" (allowed by --allow-unpinned)" if allowed else ""))]
    digest = scenario.engine.image_digest
    return [CheckItem(name="pinned-image", level="ok",
                      message=f"engine.image {image} is pinned" + (f" to digest {digest}" if digest else
                                                                  "; its digest is recorded at launch"))]


def check_weight_offload(scenario: Scenario) -> list[CheckItem]:
    """``--cpu-offload-gb`` offloads model WEIGHTS, not KV cache: an error unless explicitly allowed."""
    hits: list[str] = []
    if any(a.split("=")[0] in WEIGHT_OFFLOAD_FLAGS for a in scenario.engine.extra_args):
        hits.append("engine.extra_args")
    for i, arm in enumerate(scenario.arms):
        extra = arm.engine.get("extra_args") or []
        if isinstance(extra, list) and any(str(a).split("=")[0] in WEIGHT_OFFLOAD_FLAGS for a in extra):
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


def check_lengths(scenario: Scenario) -> list[CheckItem]:
    """Planned prompt + output lengths must fit ``max_model_len`` when it is set."""
    limit = scenario.engine.max_model_len
    if limit is None:
        return []
    out: list[CheckItem] = []
    for i, cls in enumerate(scenario.workload.classes):
        need = cls.prompt_tokens.max + cls.output_tokens.max
        if need > limit:
            out.append(CheckItem(name="lengths", level="error",
                                 message=f"workload.classes[{i}] ({cls.name}): up to {cls.prompt_tokens.max} prompt + "
                                 f"{cls.output_tokens.max} output tokens = {need} exceeds engine.max_model_len "
                                 f"{limit}"))
    if not out:
        out.append(CheckItem(name="lengths", level="ok", message=f"all request classes fit max_model_len {limit}"))
    return out
