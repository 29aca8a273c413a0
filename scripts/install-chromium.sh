#!/usr/bin/env bash
# Install Debian's chromium for the report's headless-browser test (tests/integration/report).
# Idempotent: does nothing when /usr/bin/chromium already runs. Needs root (or sudo) and apt.
# The test drives this browser through playwright's Python package with executable_path=/usr/bin/chromium,
# so no playwright browser download is needed.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ] && "$CHROMIUM" --headless=new --no-sandbox --version >/dev/null 2>&1; then
    echo "chromium already installed: $("$CHROMIUM" --version 2>/dev/null)"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: apt-get not found; install chromium so that $CHROMIUM exists" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "error: run as root (or install sudo) to install chromium" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core

if [ ! -x "$CHROMIUM" ]; then
    echo "error: chromium installed but $CHROMIUM is missing" >&2
    exit 1
fi
echo "installed: $("$CHROMIUM" --version 2>/dev/null)"
