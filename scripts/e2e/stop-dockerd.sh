#!/usr/bin/env bash
# Stop the dockerd that start-dockerd.sh started (by PID, SIGTERM, bounded wait, then SIGKILL); idempotent.
# shellcheck source=scripts/e2e/common.sh
source "$(dirname "$0")/common.sh"
DOCKERD_STOP_TIMEOUT="${DOCKERD_STOP_TIMEOUT:-30}"

if [[ ! -f "$DOCKERD_PIDFILE" ]]; then
  log "no dockerd started by these scripts (no $DOCKERD_PIDFILE)"
  exit 0
fi
pid="$(cat "$DOCKERD_PIDFILE")"
alive() { kill -0 "$pid" 2>/dev/null; }
if alive && [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == dockerd ]]; then
  log "stopping dockerd (pid $pid)"
  kill -TERM "$pid"
  if ! wait_until "$DOCKERD_STOP_TIMEOUT" bash -c "! kill -0 $pid"; then
    log "dockerd still running after ${DOCKERD_STOP_TIMEOUT}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_until 10 bash -c "! kill -0 $pid" || die "dockerd (pid $pid) would not stop"
  fi
else
  log "dockerd (pid $pid) is not running"
fi
rm -f "$DOCKERD_PIDFILE"
if mountpoint -q /run/docker/netns/default 2>/dev/null; then
  umount /run/docker/netns/default || log "could not unmount /run/docker/netns/default"
fi
log "dockerd stopped"
