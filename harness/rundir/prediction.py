"""A prediction's record in its run directory (``prediction.json``), written and read in one place.

``harness predict`` has the conductor write the record into the new run directory before the first arm starts
(:attr:`harness.run.options.RunOptions.prediction`), so a prediction that is interrupted, resumed with ``harness run
--resume`` or re-reported with ``harness report`` stays one: every summary built from the run directory gets the
record attached (:func:`attach_from_run`), its warnings said once more among the summary's own, and every report is
marked PREDICTED with the profile and the fidelity table. What the record holds is built in
:mod:`harness.predict.record`.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from harness.core.atomic import write_text_atomic
from harness.core.input_files import InputFileError, read_text
from harness.rundir.layout import RunDir
from harness.schema.prediction import Prediction
from harness.schema.summary import Summary

MAX_PREDICTION_BYTES = 1 << 20
WARNING_PREFIX = "PREDICTED: "


class PredictionFileError(ValueError):
    """A run's ``prediction.json`` that cannot be read or is not a prediction record (bad input, exit 2)."""


def write_prediction(run_dir: Path, prediction: Prediction) -> Path:
    """Keep the record in the run directory."""
    path = RunDir(run_dir).prediction
    write_text_atomic(path, prediction.model_dump_json(indent=2) + "\n")
    return path


def read_prediction(run_dir: Path) -> Prediction | None:
    """The run's prediction record, or None when the run is not a prediction; raises :class:`PredictionFileError`."""
    path = RunDir(run_dir).prediction
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
    """``summary`` with the run's prediction record attached, when it has one."""
    return with_prediction(summary, read_prediction(run_dir))
