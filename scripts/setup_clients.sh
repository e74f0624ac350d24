#!/usr/bin/env bash
# The client venv for tests/clients: stock Realtime clients whose pins conflict with the gateway's
# (pipecat-ai needs protobuf<7; the gateway's stack has 7), installed from PyPI into .venv-clients
# and run by the tests as subprocesses. The OpenAI SDK and the Agents SDK for Python install beside
# the gateway (its test extras); the Agents SDK for JavaScript is npm's (scripts/build_agents_sdk_bundle.sh).
# Idempotent: does nothing when .venv-clients holds the pinned versions already.
# Usage: scripts/setup_clients.sh [--force]
set -euo pipefail
cd "$(dirname "$0")/.."

PIPECAT_VERSION=1.14.0
want="pipecat-ai[openai]==$PIPECAT_VERSION"
stamp=.venv-clients/clients.version

if [ "${1:-}" != "--force" ] && [ -x .venv-clients/bin/python ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
python=${PYTHON:-python3}
rm -rf .venv-clients
"$python" -m venv .venv-clients
.venv-clients/bin/python -m pip install --disable-pip-version-check -q "$want"
echo "$want" > "$stamp"
echo "built .venv-clients ($want)"
