#!/usr/bin/env bash
# Build the OpenAI Agents SDK for JavaScript (@openai/agents-realtime) into one ES module for the
# browser, for tests/browser/test_agents_sdk.py: the stock Realtime client, run against the gateway.
#
# npm installs the pinned SDK and esbuild into .cache/agents-sdk/ (gitignored, never in the
# sources); esbuild bundles the SDK's browser build into .cache/agents-sdk/agents-realtime.mjs.
# Idempotent: does nothing when that bundle exists for the pinned versions.
# Usage: scripts/build_agents_sdk_bundle.sh [--force]
set -euo pipefail
cd "$(dirname "$0")/.."

SDK_VERSION=0.20.0
ESBUILD_VERSION=0.28.2
dir=.cache/agents-sdk
bundle=$dir/agents-realtime.mjs
stamp=$dir/agents-realtime.version
want="@openai/agents-realtime@$SDK_VERSION esbuild@$ESBUILD_VERSION"

if [ "${1:-}" != "--force" ] && [ -s "$bundle" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
command -v npm >/dev/null || { echo "build_agents_sdk_bundle: npm (Node.js 18+) is needed" >&2; exit 1; }

mkdir -p "$dir"
# A package.json of its own keeps npm from walking up into the repository.
[ -f "$dir/package.json" ] || echo '{"name": "agents-sdk-bundle", "private": true}' > "$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
  "@openai/agents-realtime@$SDK_VERSION" "esbuild@$ESBUILD_VERSION"

# Only what the test page imports; --platform=browser picks the SDK's browser shims.
(cd "$dir" && echo "export { RealtimeAgent, RealtimeSession, OpenAIRealtimeWebRTC } from '@openai/agents-realtime';" \
  | node_modules/.bin/esbuild --bundle --format=esm --platform=browser --target=es2022 --minify \
      --legal-comments=none --log-level=warning --outfile=agents-realtime.mjs.tmp)
mv "$dir/agents-realtime.mjs.tmp" "$bundle"
echo "$want" > "$stamp"
echo "built $bundle ($want)"
