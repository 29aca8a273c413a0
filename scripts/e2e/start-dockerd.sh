#!/usr/bin/env bash
# Start dockerd in the background (PID in $DOCKERD_PIDFILE) and wait, bounded, until `docker info` answers.
# Does nothing when a daemon already answers; only a daemon this script started is ever stopped by stop-dockerd.sh.
# shellcheck source=scripts/e2e/common.sh
source "$(dirname "$0")/common.sh"
DOCKERD_START_TIMEOUT="${DOCKERD_START_TIMEOUT:-60}"

if docker_ok; then
  log "a Docker daemon already answers; not starting another"
  exit 0
fi
if [[ -f "$DOCKERD_PIDFILE" ]] && kill -0 "$(cat "$DOCKERD_PIDFILE")" 2>/dev/null; then
  log "dockerd (pid $(cat "$DOCKERD_PIDFILE")) is starting; waiting for it"
else
  dockerd_bin="$(command -v dockerd || echo /usr/sbin/dockerd)"
  [[ -x "$dockerd_bin" ]] || die "dockerd not found: run scripts/e2e/install-docker.sh first"
  # A netns mount left by a daemon that was killed makes the next start fail.
  if mountpoint -q /run/docker/netns/default 2>/dev/null; then umount /run/docker/netns/default || true; fi
  log "starting dockerd (log: $DOCKERD_LOG)"
  setsid "$dockerd_bin" >"$DOCKERD_LOG" 2>&1 </dev/null &
  echo $! >"$DOCKERD_PIDFILE"
fi
if ! wait_until "$DOCKERD_START_TIMEOUT" docker_ok; then
  tail -20 "$DOCKERD_LOG" >&2 || true
  die "dockerd did not answer within ${DOCKERD_START_TIMEOUT}s"
fi
log "dockerd ready (pid $(cat "$DOCKERD_PIDFILE"))"
