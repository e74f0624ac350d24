"""Shared fixtures: the real models (loaded once per test run), speech made at test time with the
bundled Piper voice (deterministic: no sampled noise, see tests/models/speech_fixtures.py), and
gateway configurations on free loopback ports. Helpers: tests/helpers.py."""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.media.resample import Resampler
from gateway.models.base import ModelSet
from gateway.server.runner import free_port

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def models() -> ModelSet:
    from gateway.models.loader import load_models

    return load_models(GatewayConfig())


@pytest.fixture(scope="session")
def speech() -> Callable[[str], np.ndarray]:
    """``speech(text)`` -> int16 mono 48 kHz samples of the text spoken by the bundled voice, the
    same samples for the same text in every test and run (a voice of its own, without Piper's noise)."""
    from tests.models.speech_fixtures import load_tts

    tts = load_tts()
    cache: dict[str, np.ndarray] = {}

    def make(text: str) -> np.ndarray:
        if text not in cache:
            audio = np.concatenate(list(tts.synthesize(text)))
            resampler = Resampler(48000)
            cache[text] = np.concatenate([resampler.resample_array(audio, tts.sample_rate), resampler.flush()])
        return cache[text]

    return make


@pytest.fixture(scope="session")
def caller_speech() -> Callable[[str], np.ndarray]:
    """``caller_speech(text)`` -> int16 mono 48 kHz: a second speaker, not the assistant's voice.

    The bundled voice is the only one, so the caller is the test voice (deterministic, as for
    ``speech``) played 12 % fast, which raises its pitch by about two semitones: a different,
    higher voice speaking a little quicker.
    """
    from tests.models.speech_fixtures import load_tts

    tts = load_tts()
    cache: dict[str, np.ndarray] = {}

    def make(text: str) -> np.ndarray:
        if text not in cache:
            audio = np.concatenate(list(tts.synthesize(text)))
            resampler = Resampler(48000)
            rate = int(tts.sample_rate * 1.12)  # read faster than it was made: higher, quicker
            cache[text] = np.concatenate([resampler.resample_array(audio, rate), resampler.flush()])
        return cache[text]

    return make


@pytest.fixture(autouse=True)
def root_logging_restored() -> Iterator[None]:
    """Every test leaves the root logger's handlers and level as it found them: a test that runs
    ``voice-gateway`` in process (``cli.main`` configures logging) would otherwise leave a handler on
    pytest's captured stderr, closed after that test ("Logging error ... I/O operation on closed file"
    under every later failure)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def gateway_config() -> Callable[..., GatewayConfig]:
    def make(**overrides) -> GatewayConfig:
        overrides.setdefault("pool_size", 1)
        # A talking capacity of the pool size: admission never depends on this machine's measured
        # decode speed (tests/server/test_talking_capacity.py sets its own).
        overrides.setdefault("talking_capacity", overrides["pool_size"])
        return GatewayConfig(port=free_port(), **overrides)

    return make


@pytest.fixture
def silent_server() -> Iterator[str]:
    """An HTTP server that accepts connections and never sends a byte (an LLM server that hangs);
    yields its OpenAI-style base URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    stop.set()
    thread.join(2)
    for connection in held:
        connection.close()
    listener.close()


@pytest.fixture(scope="session")
def stt_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real faster-whisper-server on Whisper base (tests/models/speech_servers.py; it loads the
    model on the first request); yields its base URL (``http://127.0.0.1:<port>/v1``). Always stopped."""
    from tests.models.speech_servers import start_stt_server, wait_ready

    service, base_url = start_stt_server(tmp_path_factory.mktemp("stt-server"))
    try:
        wait_ready(service, base_url.removesuffix("/v1") + "/health")
        yield base_url
    finally:
        service.stop()


@pytest.fixture(scope="session")
def tts_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real local-tts-studio speaking with the bundled Piper voice (tests/models/speech_servers.py;
    bearer key ``TTS_KEY``); yields its base URL (``http://127.0.0.1:<port>/v1``). Always stopped."""
    from tests.models.speech_servers import start_tts_server, wait_ready

    service, base_url = start_tts_server(tmp_path_factory.mktemp("tts-server"))
    try:
        wait_ready(service, base_url + "/models")
        yield base_url
    finally:
        service.stop()
