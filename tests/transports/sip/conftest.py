"""Fixtures of the SIP tests: the shared deterministic test speech at 8 kHz, a webhook receiver,
a gateway with SIP on."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np
import pytest
from aiohttp import web

from gateway.media.resample import Resampler
from gateway.server.runner import free_port

WEBHOOK_KEY = b"voice-gateway-sip-test-key-0123456789"
WEBHOOK_SECRET = "whsec_" + base64.b64encode(WEBHOOK_KEY).decode()


@pytest.fixture(scope="session")
def speech_8k(speech: Callable[[str], np.ndarray]) -> Callable[[str], np.ndarray]:
    """``speech_8k(text)`` -> int16 mono 8 kHz of the shared deterministic test voice (``speech``)."""
    cache: dict[str, np.ndarray] = {}

    def make(text: str) -> np.ndarray:
        if text not in cache:
            resampler = Resampler(8000)
            cache[text] = np.concatenate([resampler.resample_array(speech(text), 48000), resampler.flush()])
        return cache[text]

    return make


class WebhookReceiver:
    """An HTTP endpoint the gateway POSTs its webhooks to: ``received`` holds (headers, body text)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/webhook"
        self.received: list[tuple[dict[str, str], str]] = []
        self.arrived = asyncio.Event()
        self.status = 200

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append((dict(request.headers), await request.text()))
        self.arrived.set()
        return web.Response(status=self.status)

    async def next(self, within: float = 15) -> tuple[dict[str, str], str]:
        """The next webhook not yet taken."""
        await asyncio.wait_for(self.arrived.wait(), within)
        self.arrived.clear()
        return self.received[-1]


@pytest.fixture
async def webhook() -> AsyncIterator[WebhookReceiver]:
    receiver = WebhookReceiver()
    app = web.Application()
    app.router.add_post("/webhook", receiver.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", receiver.port).start()
    yield receiver
    await runner.cleanup()


def sip_config(gateway_config: Callable[..., Any], **overrides: Any) -> Any:
    """A gateway config with SIP on a free port (UDP and TCP) of 127.0.0.1."""
    overrides.setdefault("sip_port", free_port())
    overrides.setdefault("sip_host", "127.0.0.1")
    return gateway_config(**overrides)
