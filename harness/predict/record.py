"""The prediction's record: built from the profile, the simulator's fidelity table and the mapping; kept in the run
directory as ``prediction.json`` (so ``harness report RUN_DIR`` rebuilds a PREDICTED summary from the run's files
alone) and attached to the summary as its ``prediction`` part, its warnings repeated in the summary's warnings."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from harness.config.arms import TrtllmKvCache
from harness.config.scenario import Scenario
from harness.core.input_files import InputFileError, read_text
from harness.predict.mapping import Mapped, PredictTarget
from harness.schema.prediction import FidelityItem, Prediction, PredictionProfile, SourceNote
from harness.schema.summary import Summary
from harness.sim.fidelity import load_fidelity

PREDICTION_FILE = "prediction.json"
MAX_PREDICTION_BYTES = 1 << 20
WARNING_PREFIX = "PREDICTED: "


class PredictionFileError(ValueError):
    """A run's ``prediction.json`` that cannot be read or is not a prediction record (bad input, exit 2)."""


def gpu_kv_blocks(scenario: Scenario, target: PredictTarget) -> tuple[int, int] | None:
    """The baseline's GPU KV cache on the profile, in blocks, and the block size (the simulator's rule)."""
    profile = target.profile
    engine = scenario.engine_for(scenario.baseline)
    off = scenario.baseline.offload
    block = off.tokens_per_block if isinstance(off, TrtllmKvCache) else profile.scheduler.block_size
    kv = profile.kv_cache_bytes(engine.gpu_memory_utilization)
    per_block = profile.model.kv_bytes_per_token * block
    return (kv // per_block, block) if kv > per_block else None


def build_prediction(source: Scenario, mapped: Mapped, target: PredictTarget) -> Prediction:
    """The summary's ``prediction`` part for this mapping."""
    p = target.profile
    blocks = gpu_kv_blocks(mapped.scenario, target)
    profile = PredictionProfile(
        name=target.profile_name, description=p.description, model=p.model.name, gpu=p.gpu.name,
        gpu_kv_blocks=blocks[0] if blocks else None, block_size=blocks[1] if blocks else None,
        sources=[SourceNote(part=s.part, text=s.text) for s in p.sources])
    fidelity = [FidelityItem(**row.model_dump(), status_text=row.status_text) for row in load_fidelity()]
    return Prediction(profile=profile, fidelity=fidelity, clock=target.clock, scenario_file=source.source_file,
                      scenario=source.name, engine=source.engine.kind, model=source.engine.model,
                      mapping=list(mapped.changes), warnings=list(mapped.warnings))


def write_prediction(run_dir: Path, prediction: Prediction) -> Path:
    """Keep the record in the run directory."""
    path = run_dir / PREDICTION_FILE
    path.write_text(prediction.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path


def read_prediction(run_dir: Path) -> Prediction | None:
    """The run's prediction record, or None when the run is not a prediction."""
    path = run_dir / PREDICTION_FILE
    if not path.exists():
        return None
    try:
        return Prediction.model_validate(json.loads(read_text(path, max_bytes=MAX_PREDICTION_BYTES,
                                                              what="prediction record")))
    except InputFileError as exc:
        raise PredictionFileError(f"cannot read {exc}") from None
    except (ValueError, ValidationError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PredictionFileError(f"{path}: not a prediction record: {first}") from None


def with_prediction(summary: Summary, prediction: Prediction | None) -> Summary:
    """The summary marked as a prediction (its warnings said once more among the summary's own)."""
    if prediction is None:
        return summary
    extra = [f"{WARNING_PREFIX}{w}" for w in prediction.warnings]
    warnings = [*extra, *(w for w in summary.warnings if w not in extra)]
    return summary.model_copy(update={"prediction": prediction, "warnings": warnings})


def attach_from_run(run_dir: Path, summary: Summary) -> Summary:
    """``summary`` with the run's prediction record attached, when it has one (``harness report``)."""
    return with_prediction(summary, read_prediction(run_dir))
