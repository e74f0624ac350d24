"""Shared fixtures: the real models (loaded once per test run), speech made at test time with the
bundled Piper voice, and gateways served on loopback."""

from __future__ import annotations

import asyncio
import os
from typing import Callable, Optional

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.media.resample import Resampler
from gateway.models.base import ModelSet
from gateway.server.runner import free_port, running_gateway

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def models() -> ModelSet:
    from gateway.models.loader import load_models

    return load_models(GatewayConfig())


@pytest.fixture(scope="session")
def speech(models: ModelSet) -> Callable[[str], np.ndarray]:
    """``speech(text)`` -> int16 mono 48 kHz samples of the text spoken by the bundled voice."""
    cache: dict[str, np.ndarray] = {}

    def make(text: str) -> np.ndarray:
        if text not in cache:
            audio = np.concatenate(list(models.tts.synthesize(text)))
            resampler = Resampler(48000)
            cache[text] = np.concatenate([resampler.resample_array(audio, models.tts.sample_rate), resampler.flush()])
        return cache[text]

    return make


def serve(config: GatewayConfig, models: Optional[ModelSet], **kwargs):
    """Run a gateway app on loopback for the test; ``async with`` yields (base_url, app)."""
    return running_gateway(config, models, **kwargs)


@pytest.fixture
def gateway_config() -> Callable[..., GatewayConfig]:
    def make(**overrides) -> GatewayConfig:
        overrides.setdefault("pool_size", 1)
        return GatewayConfig(port=free_port(), **overrides)

    return make


async def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds pass; returns its last value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if predicate():
            return True
        await asyncio.sleep(interval)
    return predicate()
