"""The client side every OpenAI-compatible HTTP engine shares: where the server is, its key, the
timeouts, one connection pool per engine, and what a failed request is called in the log.

Each engine (LLM, STT, TTS) is one instance per process, shared by every unit, so its client, made
once here, is the process's one connection pool to that server (the ``openai`` package's client:
``Authorization: Bearer`` when a key is set, no retries: a failure reaches the stage at once).
Connecting is bounded by ``connect_timeout_s``, every read by ``read_timeout_s`` (for a streamed
body: the longest silence between two pieces of it).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Optional

import openai


class SpeechServerError(RuntimeError):
    """An STT or TTS server could not be used (unreachable, silent, an HTTP error, a broken or
    malformed body). The message names the server's URL: for the operator's log; the stage reports
    only that it failed (``stt_failed`` / ``tts_failed``), never this text, to the caller."""


@dataclass
class Endpoint:
    """One OpenAI-compatible server as an engine uses it: ``label`` names the engine in messages
    ("LLM", "STT", "TTS"); ``base_url`` ends in ``/v1`` (``http://127.0.0.1:8000/v1``); ``api_key``
    is sent as a bearer key when set; timeouts are in seconds."""

    label: str
    base_url: str
    api_key: str = ""
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    _client: Optional[openai.OpenAI] = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")

    @property
    def timeout(self) -> openai.Timeout:
        """Per network operation: connect, and each read (what a silent server trips)."""
        return openai.Timeout(self.read_timeout_s, connect=self.connect_timeout_s, read=self.read_timeout_s)

    def client(self) -> openai.OpenAI:
        """The blocking client (thread-safe; one connection pool), made on first use."""
        with self._lock:
            if self._client is None:
                self._client = openai.OpenAI(
                    base_url=self.base_url, api_key=self.api_key or "none", timeout=self.timeout, max_retries=0
                )
            return self._client

    def async_client(self) -> openai.AsyncOpenAI:
        """A new asyncio client; make it on the event loop that will use it (its pool lives there)."""
        return openai.AsyncOpenAI(
            base_url=self.base_url, api_key=self.api_key or "none", timeout=self.timeout, max_retries=0
        )

    def close(self) -> None:
        """Close the blocking client's connections (a later request opens new ones)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def failure(self, exc: BaseException, path: str) -> str:
        """What went wrong with the request to ``path`` (``/audio/speech``), for the log: the
        server's URL, and a timeout, no connection, an HTTP status or a broken body."""
        url = f"{self.base_url}{path}"
        server = f"{self.label} server {url}"
        if isinstance(exc, openai.APITimeoutError):
            return (
                f"{server} did not answer in time "
                f"(connect timeout {self.connect_timeout_s} s, read timeout {self.read_timeout_s} s)"
            )
        if isinstance(exc, openai.APIConnectionError):
            return f"{server} cannot be reached: {exc}"
        if isinstance(exc, openai.APIStatusError):
            return f"{server} answered HTTP {exc.status_code}: {str(exc)[:300]}"
        # A read timeout or a dropped connection while a streamed body arrives comes from the
        # HTTP library itself (``ReadTimeout``, ``RemoteProtocolError``): its class names it.
        return f"{server} stream failed: {type(exc).__name__}: {exc}"
