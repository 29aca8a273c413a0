#!/usr/bin/env bash
# Build the simulator image kvoffload-harness-sim:<version> from local material only:
#   1. debootstrap a minimal bookworm root file system from this machine's Debian mirror (tarball cached),
#   2. `docker import` it as kvoffload-harness-base:bookworm,
#   3. build the harness wheel and a wheelhouse of its dependencies on the host (cached by requirement hash),
#   4. `docker build` (legacy builder) the simulator image; skipped when the image already holds this source.
# Prints the image reference on stdout.
# shellcheck source=scripts/e2e/common.sh
source "$(dirname "$0")/common.sh"
docker_ok || die "no Docker daemon answers: run scripts/e2e/start-dockerd.sh first"

PY="${HARNESS_PYTHON:-$E2E_REPO/.venv/bin/python}"
[[ -x "$PY" ]] || PY="$(command -v python3)"
version="$("$PY" -c 'import tomllib,sys; print(tomllib.load(open(sys.argv[1],"rb"))["project"]["version"])' \
  "$E2E_REPO/pyproject.toml")"
IMAGE="${SIM_IMAGE:-kvoffload-harness-sim:$version}"
BASE_IMAGE="${SIM_BASE_IMAGE:-kvoffload-harness-base:bookworm}"
ROOTFS_TAR="$E2E_CACHE/rootfs-bookworm-minbase-python3.tar"

# --- 1+2: base image -------------------------------------------------------------------------------------------
if ! "$DOCKER_BIN" image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  if [[ ! -s "$ROOTFS_TAR" ]]; then
    command -v debootstrap >/dev/null 2>&1 || die "debootstrap missing: run scripts/e2e/install-docker.sh"
    mirror="${DEBIAN_MIRROR:-$(bash "$(dirname "$0")/debian-mirror.sh" bookworm)}"
    rootfs="$(mktemp -d "$E2E_CACHE/rootfs.XXXXXX")"
    trap 'rm -rf "$rootfs"' EXIT
    log "debootstrap bookworm (minbase + python3) from $mirror"
    start=$SECONDS
    debootstrap --variant=minbase --include=python3,python3-venv bookworm "$rootfs" "$mirror" \
      >"$E2E_DIR/debootstrap.log" 2>&1 || { tail -20 "$E2E_DIR/debootstrap.log" >&2; die "debootstrap failed"; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
      "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/*
    tar -C "$rootfs" -cf "$ROOTFS_TAR.part" . && mv "$ROOTFS_TAR.part" "$ROOTFS_TAR"
    rm -rf "$rootfs"; trap - EXIT
    log "root file system cached: $ROOTFS_TAR ($((SECONDS - start)) s)"
  fi
  log "importing $BASE_IMAGE"
  "$DOCKER_BIN" import --change 'CMD ["/bin/bash"]' "$ROOTFS_TAR" "$BASE_IMAGE" >/dev/null
fi

# --- 3: wheel and wheelhouse -------------------------------------------------------------------------------------
source_hash="$(cd "$E2E_REPO" && find harness pyproject.toml -type f \( -name '*.py' -o -name '*.yaml' -o -name '*.j2' \
  -o -name '*.css' -o -name '*.js' -o -name '*.toml' -o -name 'py.typed' \) -not -path '*/__pycache__/*' -print0 \
  | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
have="$("$DOCKER_BIN" image inspect -f '{{ index .Config.Labels "io.kvoffload-harness.source-hash" }}' "$IMAGE" \
  2>/dev/null || true)"
if [[ "$have" == "$source_hash" && -z "${SIM_IMAGE_REBUILD:-}" ]]; then
  log "$IMAGE is up to date (source $source_hash)"
  echo "$IMAGE"; exit 0
fi

ctx="$(mktemp -d "$E2E_DIR/sim-image-ctx.XXXXXX")"
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/dist" "$ctx/wheelhouse"
cp "$(dirname "$0")/sim-image/Dockerfile" "$ctx/Dockerfile"
log "building the harness wheel"
"$PY" -m pip wheel --no-deps --no-build-isolation -q -w "$ctx/dist" "$E2E_REPO" >"$E2E_DIR/wheel.log" 2>&1 \
  || "$PY" -m pip wheel --no-deps -q -w "$ctx/dist" "$E2E_REPO" >>"$E2E_DIR/wheel.log" 2>&1 \
  || { tail -20 "$E2E_DIR/wheel.log" >&2; die "building the wheel failed"; }
"$PY" - "$E2E_REPO/pyproject.toml" >"$ctx/wheelhouse/requirements.txt" <<'PYEOF'
import sys, tomllib
for req in tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]:
    print(req)
PYEOF
req_hash="$(sha256sum "$ctx/wheelhouse/requirements.txt" | cut -c1-16)"
wheelhouse="$E2E_CACHE/wheelhouse-$req_hash"
if [[ ! -f "$wheelhouse/.complete" ]]; then
  log "collecting dependency wheels into $wheelhouse"
  mkdir -p "$wheelhouse"
  "$PY" -m pip download -q --only-binary=:all: -d "$wheelhouse" -r "$ctx/wheelhouse/requirements.txt" \
    >"$E2E_DIR/wheelhouse.log" 2>&1 || { tail -20 "$E2E_DIR/wheelhouse.log" >&2; die "pip download failed"; }
  touch "$wheelhouse/.complete"
fi
cp "$wheelhouse"/*.whl "$ctx/wheelhouse/"

# --- 4: image ----------------------------------------------------------------------------------------------------
log "docker build $IMAGE (source $source_hash)"
"$DOCKER_BIN" build -q --build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg "SOURCE_HASH=$source_hash" \
  -t "$IMAGE" "$ctx" >"$E2E_DIR/sim-image-build.log" 2>&1 \
  || { tail -30 "$E2E_DIR/sim-image-build.log" >&2; die "docker build failed"; }
"$DOCKER_BIN" image prune -f --filter "label=io.kvoffload-harness.owner=harness-build" >/dev/null 2>&1 || true
log "built $IMAGE"
echo "$IMAGE"
