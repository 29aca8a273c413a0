"""Is ``engine.model`` the model the profile describes? Refuse a gross size difference, warn loudly on any other.

A profile's figures (weights, KV bytes per token, step times) are one model's: a prediction for another model is a
prediction for the profile's model under another name. What is compared, from the two model ids alone (no hub
look-up, no config.json):

* the **name**: the id's last path component, lower case, with the fine-tune suffixes that do not change the
  weights' shape dropped (``-instruct``, ``-chat``, ``-hf``, ``-it``, ``-base``); equal names (and equal
  quantisation) are a match, e.g. ``meta-llama/Llama-3.1-8B-Instruct`` and ``/models/llama-3.1-8b-instruct``;
* the **size**: the parameter count the id spells (``8B``, ``70B``, ``0.5B``); when both ids spell one and they differ
  by more than :data:`MAX_SIZE_RATIO`, the prediction is refused (exit 2, naming ``engine.model``): every figure would
  be off by that factor;
* the **quantisation** the id spells (``FP8``, ``AWQ``, ``GPTQ``, ``INT4`` ...): it changes the weights' bytes and so
  the GPU KV cache.

Anything else that differs (another name, another quantisation, a size only one id spells) is a loud warning: it is
printed, and every report repeats it in the PREDICTED header.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_SIZE_RATIO = 1.25
"""Sizes further apart than this (either way) are a different server, not a variant: 8B vs 70B is refused."""

_FINE_TUNE = {"instruct", "chat", "hf", "it", "base"}
_QUANT = {"fp8", "fp4", "nvfp4", "int8", "int4", "awq", "gptq", "w8a8", "w4a16", "w4a8", "bnb", "gguf", "mxfp4"}
_SIZE = re.compile(r"(?<![0-9a-z.])(\d+(?:\.\d+)?)b(?![a-z0-9])")
_SPLIT = re.compile(r"[-_.\s]+")


@dataclass(frozen=True)
class ModelId:
    """What a model id spells: its comparable name, parameter count (billions) and quantisation."""

    name: str
    billions: float | None
    quantisation: frozenset[str]

    @classmethod
    def parse(cls, model: str) -> ModelId:
        """Read an id such as ``meta-llama/Llama-3.1-70B-Instruct-FP8`` or a local path."""
        last = model.rstrip("/").rsplit("/", 1)[-1].lower()
        tokens = [t for t in _SPLIT.split(last) if t]
        quant = frozenset(t for t in tokens if t in _QUANT)
        kept = [t for t in tokens if t not in _FINE_TUNE and t not in _QUANT]
        size = _SIZE.search(last.replace("_", "-"))
        return cls(name="-".join(kept), billions=float(size.group(1)) if size else None, quantisation=quant)

    def size_text(self) -> str:
        """``~8B``, or ``size not spelled``."""
        return f"~{self.billions:g}B" if self.billions is not None else "size not spelled"


@dataclass(frozen=True)
class ModelMatch:
    """The comparison's outcome: ``refusal`` (a gross size difference) or ``warning`` (another difference), or
    neither (the profile's model)."""

    refusal: str | None = None
    warning: str | None = None


def _quant_text(q: frozenset[str]) -> str:
    return "/".join(sorted(q)).upper() if q else "none spelled"


def compare_models(engine_model: str, profile_model: str, profile_name: str) -> ModelMatch:
    """Compare the scenario's ``engine.model`` with the model the profile names (see the module docstring)."""
    mine, theirs = ModelId.parse(engine_model), ModelId.parse(profile_model)
    if mine.name == theirs.name and mine.quantisation == theirs.quantisation:
        return ModelMatch()
    head = (f"{engine_model} ({mine.size_text()}) is not the model profile {profile_name} describes, "
            f"{profile_model} ({theirs.size_text()})")
    if mine.billions is not None and theirs.billions is not None:
        ratio = max(mine.billions, theirs.billions) / min(mine.billions, theirs.billions)
        if ratio > MAX_SIZE_RATIO:
            return ModelMatch(refusal=(
                f"{head}: {ratio:.1f}x apart in size, so its weights, KV bytes per token and step times would all "
                f"be another server's. Choose a profile of your model (`harness sim profiles` lists each "
                f"profile's model) or give a profile file for it (--profile-file)"))
    differs = []
    if mine.quantisation != theirs.quantisation:
        differs.append(f"quantisation {_quant_text(mine.quantisation)} vs {_quant_text(theirs.quantisation)}: the "
                       "weights' bytes, and so the GPU KV cache, are the profile's")
    if mine.name != theirs.name:
        differs.append("another name")
    return ModelMatch(warning=(
        f"{head} ({'; '.join(differs)}). Every figure is the profile's model's: read this prediction as one "
        f"for {profile_model}, served under your model's name"))
