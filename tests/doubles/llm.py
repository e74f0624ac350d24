"""Language model doubles: a model that hangs, one that fails once, one that is slow, one that calls a tool,
one that ends its replies at once, one with a tight compute budget, and an LLM server whose stream is scripted."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Optional

from gateway.models.base import ChatMessage, Generation, GenerationOptions, LanguageModel, ToolCall


class BlockingLanguageModelDouble:
    """Blocks inside ``generate`` until ``release`` is set, ignoring cancellation (a hung model)."""

    name = "blocking-double"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def generate(
        self,
        messages: list[ChatMessage],
        max_tokens: int,
        should_stop: Callable[[], bool],
        on_text: Callable[[str], None],
        options: Optional[GenerationOptions] = None,
    ) -> Generation:
        self.entered.set()
        self.release.wait()
        on_text("Late words of a hung model. ")
        return Generation("Late words of a hung model.", 6)


class FailingOnceLanguageModelDouble:
    """Raises on the first ``generate``, then delegates to a real model."""

    def __init__(self, real: LanguageModel) -> None:
        self.real = real
        self.name = real.name
        self.failures = 0

    def generate(self, messages, max_tokens, should_stop, on_text, options=None):
        if self.failures == 0:
            self.failures += 1
            raise RuntimeError("simulated model failure")
        return self.real.generate(messages, max_tokens, should_stop, on_text, options)


class SlowLanguageModelDouble:
    """Waits ``delay_s`` (or until cancelled) before each ``generate`` of a real model: a turn
    whose first audio is late, deterministically (a busy shared engine)."""

    def __init__(self, real: LanguageModel, delay_s: float) -> None:
        self.real = real
        self.name = real.name
        self.delay_s = delay_s

    def generate(self, messages, max_tokens, should_stop, on_text, options=None):
        deadline = time.monotonic() + self.delay_s
        while time.monotonic() < deadline and not should_stop():
            time.sleep(0.02)
        if should_stop():
            return Generation("", 0, "cancelled")
        return self.real.generate(messages, max_tokens, should_stop, on_text, options)


class ToolCallingLanguageModelDouble(SlowLanguageModelDouble):
    """Answers a prompt offering tools whose last message is not a tool's output with a call of the
    first tool (``arguments``), after ``delay_s``; otherwise the real model answers (after it too)."""

    def __init__(self, real: LanguageModel, delay_s: float, arguments: str = "{}") -> None:
        super().__init__(real, delay_s)
        self.arguments = arguments
        self.calls = 0

    def generate(self, messages, max_tokens, should_stop, on_text, options=None):
        if options is None or not options.tools or messages[-1].role == "tool":
            return super().generate(messages, max_tokens, should_stop, on_text, options)
        deadline = time.monotonic() + self.delay_s
        while time.monotonic() < deadline and not should_stop():
            time.sleep(0.02)
        self.calls += 1
        call = ToolCall(f"call_double_{self.calls}", options.tools[0].name, self.arguments)
        return Generation("", 1, "tool_calls", tool_calls=[call])


class EndsAtOnceLanguageModelDouble:
    """Ends a reply at once, one token and no words (``"."``: what Qwen2.5-Coder-1.5B did with "." as
    the caller's last words), unless the end is barred (``options.min_tokens``; ``always``: even
    then); a barred reply is the real model's. ``asked`` keeps the ``min_tokens`` of every request."""

    def __init__(self, real: LanguageModel, always: bool = False) -> None:
        self.real = real
        self.name = real.name
        self.always = always
        self.asked: list[int] = []

    def generate(self, messages, max_tokens, should_stop, on_text, options=None):
        barred = options.min_tokens if options is not None else 0
        self.asked.append(barred)
        if barred and not self.always:
            return self.real.generate(messages, max_tokens, should_stop, on_text, options)
        on_text(".")
        return Generation(".", 1, "stop")


class TightBudgetLanguageModelDouble:
    """The real model with a compute budget of ``budget_s`` per reply (``GenerationOptions.budget_s``,
    as ``llm_turn_budget_s`` sets it for the engine): a long reply is cut by the budget."""

    def __init__(self, real: LanguageModel, budget_s: float) -> None:
        self.real = real
        self.name = real.name
        self.budget_s = budget_s

    def generate(self, messages, max_tokens, should_stop, on_text, options=None):
        options = replace(options or GenerationOptions(), budget_s=self.budget_s)
        return self.real.generate(messages, max_tokens, should_stop, on_text, options)


class ChatStreamServerDouble:
    """An OpenAI-compatible Chat Completions server on loopback that streams ``deltas`` (each a
    ``choices[0]`` dict: ``{"delta": {...}, "finish_reason": ...}``) as Server-Sent Events for every
    request, then (after ``hold_s`` of silence: a stalled server) ``data: [DONE]``: a server whose
    stream is known in advance (a call cut by its ``length``). ``base_url`` is its OpenAI-style
    URL; ``close()`` stops it."""

    def __init__(self, deltas: list[dict], hold_s: float = 0.0) -> None:
        import json
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for choice in deltas:
                    chunk = {
                        "id": "chatcmpl-double",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": "double",
                        "choices": [{"index": 0, "finish_reason": None, **choice}],
                    }
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                time.sleep(hold_s)
                self.wfile.write(b"data: [DONE]\n\n")

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True  # close() does not wait for a stalled stream
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
