#!/usr/bin/env bash
# Install Debian's Docker engine, docker-compose v1 and debootstrap when missing (idempotent; needs root).
# shellcheck source=scripts/e2e/common.sh
source "$(dirname "$0")/common.sh"

missing=()
command -v dockerd >/dev/null 2>&1 || [[ -x /usr/sbin/dockerd ]] || missing+=(docker.io)
[[ -x /usr/bin/docker-compose ]] || missing+=(docker-compose)
[[ -x /usr/sbin/debootstrap ]] || missing+=(debootstrap)
if ((${#missing[@]} == 0)); then
  log "docker.io, docker-compose and debootstrap already installed"
  exit 0
fi
[[ $(id -u) == 0 ]] || die "installing ${missing[*]} needs root"
log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt_opts=(-y -q -o DPkg::Lock::Timeout=600)
apt-get "${apt_opts[@]}" update >/dev/null || apt-get "${apt_opts[@]}" update
apt-get install "${apt_opts[@]}" --no-install-recommends "${missing[@]}" >"$E2E_DIR/apt-install.log" 2>&1 \
  || { tail -20 "$E2E_DIR/apt-install.log" >&2; die "apt-get install ${missing[*]} failed"; }
log "installed ${missing[*]}"
