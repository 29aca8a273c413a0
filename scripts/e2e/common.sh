# Shared settings for the end-to-end scripts; sourced, not run.
# shellcheck shell=bash
set -euo pipefail

E2E_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
E2E_DIR="${E2E_DIR:-$E2E_REPO/.e2e}"
E2E_CACHE="${E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvoffload-harness-e2e}"
DOCKERD_PIDFILE="${DOCKERD_PIDFILE:-$E2E_DIR/dockerd.pid}"
DOCKERD_LOG="${DOCKERD_LOG:-$E2E_DIR/dockerd.log}"
# Debian's CLI talks to Debian's daemon; a newer CLI elsewhere on PATH would ask for BuildKit.
DOCKER_BIN="${DOCKER_BIN:-$(command -v /usr/bin/docker || command -v docker || echo docker)}"
export DOCKER_BUILDKIT=0
mkdir -p "$E2E_DIR" "$E2E_CACHE"

log() { printf '[e2e %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# wait_until SECONDS CMD...: run CMD every half second until it succeeds or SECONDS pass.
wait_until() {
  local limit=$1; shift
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    (( SECONDS < deadline )) || return 1
    sleep 0.5
  done
}

docker_ok() { "$DOCKER_BIN" info >/dev/null 2>&1; }
