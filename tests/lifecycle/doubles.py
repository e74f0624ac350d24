"""Test doubles for failure tests (never used by the product): language models that block or fail."""

from __future__ import annotations

import threading
from typing import Callable

from gateway.models.base import ChatMessage, LanguageModel


class BlockingLanguageModelDouble:
    """Blocks inside ``generate`` until ``release`` is set, ignoring cancellation (a hung model)."""

    name = "blocking-double"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def generate(self, messages: list[ChatMessage], max_tokens: int, should_stop: Callable[[], bool],
                 on_text: Callable[[str], None]) -> tuple[str, int]:
        self.entered.set()
        self.release.wait()
        on_text("Late words of a hung model. ")
        return "Late words of a hung model.", 6


class FailingOnceLanguageModelDouble:
    """Raises on the first ``generate``, then delegates to a real model."""

    def __init__(self, real: LanguageModel) -> None:
        self.real = real
        self.name = real.name
        self.failures = 0

    def generate(self, messages, max_tokens, should_stop, on_text):
        if self.failures == 0:
            self.failures += 1
            raise RuntimeError("simulated model failure")
        return self.real.generate(messages, max_tokens, should_stop, on_text)
