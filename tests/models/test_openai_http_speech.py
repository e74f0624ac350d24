"""The openai_http STT and TTS engines against real third-party servers on loopback.

faster-whisper-server transcribes the test speech; local-tts-studio speaks a sentence that the
gateway's own Whisper then hears back (tests/models/speech_servers.py starts both from
``.venv-speech``). A TCP relay that holds the server's answer back shows that the TTS engine yields
audio as the body arrives and closes the connection when a response is cancelled. An absent and a
silent server give a SpeechServerError that names the server (for the log). The tests that start
the servers are ``slow`` (as the real LLM server's are).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from gateway.media.resample import Resampler
from gateway.models.openai_http.client import SpeechServerError
from gateway.models.openai_http.stt import OpenAIHttpSpeechToText
from gateway.models.openai_http.tts import OPENAI_MODEL, OpenAIHttpTextToSpeech
from gateway.models.piper_tts import PiperTextToSpeech
from gateway.models.whisper import WhisperSpeechToText
from tests.helpers import QUESTION, free_port, says
from tests.models.speech_fixtures import load_stt, load_tts, speak
from tests.models.speech_servers import STT_MODEL, TTS_KEY

SENTENCE = "The capital of Italy is Rome, a city of fountains."


@pytest.fixture(scope="module")
def voice() -> PiperTextToSpeech:
    return load_tts()


@pytest.fixture(scope="module")
def whisper() -> WhisperSpeechToText:
    return load_stt()


def to_16k(audio: np.ndarray, rate: int) -> np.ndarray:
    """float32 -1..1 at ``rate`` Hz -> float32 -1..1 at 16 kHz."""
    resampler = Resampler(16000)
    out = np.concatenate([resampler.resample_array(audio, rate), resampler.flush()])
    return out.astype(np.float32) / 32768.0


@pytest.mark.slow
def test_the_transcription_server_hears_the_test_question(stt_server: str, voice: PiperTextToSpeech) -> None:
    stt = OpenAIHttpSpeechToText(STT_MODEL, stt_server)
    try:
        heard = stt.transcribe(speak(voice, QUESTION), language="en")
        assert says(heard, QUESTION), heard
        assert heard == heard.strip()
    finally:
        stt.close()


@pytest.mark.slow
def test_the_speech_server_is_heard_back_by_the_local_whisper(tts_server: str, whisper: WhisperSpeechToText) -> None:
    tts = OpenAIHttpTextToSpeech(OPENAI_MODEL, tts_server, api_key=TTS_KEY)
    try:
        pieces = list(tts.synthesize(SENTENCE))
        assert tts.sample_rate == 22050  # the voice's own rate, read from the WAV header
        audio = np.concatenate(pieces)
        assert all(p.dtype == np.float32 for p in pieces) and audio.size > 22050  # over 1 s of speech
        assert 0.1 < float(np.abs(audio).max()) <= 1.0
        heard = whisper.transcribe(to_16k(audio, tts.sample_rate))
        assert says(heard, SENTENCE), heard
        assert list(tts.synthesize("   ")) == []  # nothing to say: no request
    finally:
        tts.close()


@pytest.mark.slow
def test_the_bearer_key_is_sent_and_a_refusal_is_an_error(tts_server: str) -> None:
    tts = OpenAIHttpTextToSpeech(OPENAI_MODEL, tts_server)  # no key: local-tts-studio wants one
    with pytest.raises(SpeechServerError, match=r"TTS server .*/audio/speech answered HTTP 401"):
        list(tts.synthesize("Hello."))
    tts.close()


class HoldingRelay:
    """TCP relay 127.0.0.1:port -> the server that passes the server's first ``hold_after`` bytes
    of each answer, then holds the rest until :attr:`release` is set; :attr:`client_closed` is set
    when the client closes its connection."""

    def __init__(self, server_port: int, hold_after: int) -> None:
        self.server_port = server_port
        self.hold_after = hold_after
        self.release = threading.Event()
        self.client_closed = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        try:
            client, _ = self.listener.accept()
        except OSError:
            return
        server = socket.create_connection(("127.0.0.1", self.server_port))
        threading.Thread(target=self._to_server, args=(client, server), daemon=True).start()
        threading.Thread(target=self._to_client, args=(server, client), daemon=True).start()

    def _to_server(self, client: socket.socket, server: socket.socket) -> None:
        try:
            while data := client.recv(65536):
                server.sendall(data)
        except OSError:
            pass
        self.client_closed.set()
        server.close()

    def _to_client(self, server: socket.socket, client: socket.socket) -> None:
        passed = 0
        try:
            while data := server.recv(4096):
                if passed + len(data) > self.hold_after and not self.release.is_set():
                    client.sendall(data[: max(0, self.hold_after - passed)])
                    data = data[max(0, self.hold_after - passed) :]
                    passed = self.hold_after
                    self.release.wait(30)
                client.sendall(data)
                passed += len(data)
        except OSError:
            pass

    def close(self) -> None:
        self.release.set()
        self.listener.close()


@pytest.fixture
def relay(tts_server: str) -> Iterator[HoldingRelay]:
    port = int(tts_server.rsplit(":", 1)[1].split("/")[0])
    relay = HoldingRelay(port, hold_after=8000)  # the HTTP head and ~0.2 s of audio
    yield relay
    relay.close()


@pytest.mark.slow
def test_audio_is_yielded_as_the_body_arrives(tts_server: str, relay: HoldingRelay) -> None:
    tts = OpenAIHttpTextToSpeech(OPENAI_MODEL, f"http://127.0.0.1:{relay.port}/v1", api_key=TTS_KEY)
    speech = tts.synthesize(SENTENCE)
    first = next(speech)  # arrives while the relay holds the rest of the body back
    assert not relay.release.is_set() and 0 < first.size < 8000 // 2
    relay.release.set()
    rest = list(speech)
    whole = OpenAIHttpTextToSpeech(OPENAI_MODEL, tts_server, api_key=TTS_KEY)
    expected = np.concatenate(list(whole.synthesize(SENTENCE)))
    assert np.concatenate([first, *rest]).size == expected.size  # nothing lost at the hold
    tts.close()
    whole.close()


@pytest.mark.slow
def test_a_cancelled_sentence_closes_its_connection(relay: HoldingRelay) -> None:
    tts = OpenAIHttpTextToSpeech(OPENAI_MODEL, f"http://127.0.0.1:{relay.port}/v1", api_key=TTS_KEY)
    speech = tts.synthesize(SENTENCE)
    assert next(speech).size > 0
    speech.close()  # what the TTS stage's dropped generator does on a cancel
    assert relay.client_closed.wait(10), "the cancelled answer's connection stayed open"
    tts.close()


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there


def test_no_server_is_a_clear_error(voice: PiperTextToSpeech) -> None:
    url = closed_port_url()
    stt = OpenAIHttpSpeechToText(STT_MODEL, url, connect_timeout_s=2.0)
    with pytest.raises(SpeechServerError, match=rf"STT server {url}/audio/transcriptions cannot be reached"):
        stt.transcribe(speak(voice, "Hello there."))
    assert stt.transcribe(np.zeros(0, np.float32)) == ""  # no audio: nothing asked
    tts = OpenAIHttpTextToSpeech(OPENAI_MODEL, url, connect_timeout_s=2.0)
    with pytest.raises(SpeechServerError, match=rf"TTS server {url}/audio/speech cannot be reached"):
        list(tts.synthesize("Hello there."))


def test_a_silent_server_is_a_clear_error_after_the_read_timeout(silent_server: str, voice: PiperTextToSpeech) -> None:
    stt = OpenAIHttpSpeechToText(STT_MODEL, silent_server, read_timeout_s=1.0)
    with pytest.raises(
        SpeechServerError, match=r"did not answer in time \(connect timeout 5.0 s, read timeout 1.0 s\)"
    ):
        stt.transcribe(speak(voice, "Hello there."))
    tts = OpenAIHttpTextToSpeech(OPENAI_MODEL, silent_server, read_timeout_s=1.0)
    with pytest.raises(SpeechServerError, match=r"TTS server .* did not answer in time"):
        list(tts.synthesize("Hello there."))
