"""The openai_http LLM backend against a real OpenAI-compatible server on loopback.

``python -m llama_cpp.server`` (llama-cpp-python[server]) serves the default GGUF (Qwen2.5-Coder-1.5B;
its weights are memory-mapped, so the pages are shared with this process's own instance); the
gateway, configured with ``llm_backend openai_http``, takes a real WebRTC call whose typed turns
stream from that server. A TCP relay between the gateway and the server shows when the gateway
closes its stream. A socket that accepts and never answers stands in for a hung server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.client import RealtimeClient
from gateway.config import GatewayConfig
from gateway.models.backends import load_backend
from gateway.models.base import ModelSet
from gateway.models.llama_cpp.gguf_bundles import DEFAULT_LLM, bundled_gguf
from gateway.server.runner import free_port
from tests.helpers import serve

pytestmark = pytest.mark.slow

ALIAS = "qwen-served"


@pytest.fixture(scope="module")
def llm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real llama_cpp.server on loopback; yields its base URL (``.../v1``). Always killed."""
    model = bundled_gguf(DEFAULT_LLM, Path(GatewayConfig().model_cache_dir))
    port = free_port()
    log_path = tmp_path_factory.mktemp("llm-server") / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(model),
                "--model_alias",
                ALIAS,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "2048",
                "--n_threads",
                "1",
                "--interrupt_requests",
                "False",
                "--verbose",
                "False",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 90
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not start: {log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.3)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


class Relay:
    """TCP relay 127.0.0.1:port -> upstream that records when each client connection closes."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.port = self.listener.getsockname()[1]
        self.closed_at: list[float] = []
        self.opened = 0
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                continue
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self.opened += 1
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, from_client: bool) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        if from_client:
            self.closed_at.append(time.monotonic())
        for sock in (source, target):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self._stop.set()
        self.listener.close()


def http_models(models: ModelSet, base_url: str, **settings: object) -> tuple[GatewayConfig, ModelSet]:
    config = GatewayConfig(
        port=free_port(), pool_size=1, llm_backend="openai_http", llm_base_url=base_url, llm_model=ALIAS, **settings
    )  # type: ignore[arg-type]
    return config, dataclasses.replace(models, llm=load_backend("llm", config))


TEXT_ONLY = {"type": "realtime", "output_modalities": ["text"], "instructions": "You are a helpful assistant."}


async def test_a_typed_turn_streams_from_the_server_and_cancel_closes_the_stream(models, llm_server):
    relay = Relay(int(llm_server.rsplit(":", 1)[1].split("/")[0]))
    config, http = http_models(models, f"http://127.0.0.1:{relay.port}/v1", llm_read_timeout_s=20.0)
    try:
        async with serve(config, http) as (url, _app):
            client = RealtimeClient(url)
            assert await client.connect(session={**TEXT_ONLY, "max_output_tokens": 40}) == 201
            mark = client.ask("What is the capital of France?")
            done = (await client.wait_for("response.done", timeout=60, after=mark))["response"]
            assert done["status"] in ("completed", "incomplete"), done
            text = done["output"][0]["content"][0]["text"]
            deltas = client.of_type("response.output_text.delta", after=mark)
            assert len(deltas) >= 3, "the answer must stream piece by piece"
            assert "".join(d["delta"] for d in deltas).strip() == text.strip() and "paris" in text.lower(), text

            # Cancel mid-stream: the gateway closes its connection to the server at once.
            closed_before = len(relay.closed_at)
            mark = client.ask(
                "Count from one to two hundred, in words, separated by commas.", response={"max_output_tokens": 400}
            )
            await client.wait_for("response.output_text.delta", timeout=30, after=mark)
            client.send({"type": "response.cancel"})
            cancelled_at = time.monotonic()
            done = (await client.wait_for("response.done", timeout=10, after=mark))["response"]
            assert done["status"] == "cancelled"
            for _ in range(40):
                if len(relay.closed_at) > closed_before:
                    break
                await asyncio.sleep(0.05)
            assert len(relay.closed_at) > closed_before, "the cancelled stream's connection stayed open"
            assert relay.closed_at[-1] - cancelled_at < 1.0

            # The server is free again: the next turn is answered normally.
            mark = client.ask("What is the capital of Italy?")
            done = (await client.wait_for("response.done", timeout=60, after=mark))["response"]
            assert "rome" in done["output"][0]["content"][0]["text"].lower(), done
            await client.hangup()
    finally:
        relay.close()


async def test_a_server_that_never_answers_gives_an_error_event(models, silent_server, caplog):
    config, http = http_models(models, silent_server, llm_read_timeout_s=2.0)
    async with serve(config, http) as (url, _app):
        client = RealtimeClient(url)
        assert await client.connect(session=TEXT_ONLY) == 201
        asked = time.monotonic()
        mark = client.ask("Hello?")
        error = (await client.wait_for("error", timeout=10, after=mark))["error"]
        waited = time.monotonic() - asked
        assert error["code"] == "llm_failed", error
        # Why, and the LLM server's URL, are for the operator's log, not the caller.
        assert silent_server not in error["message"] and "did not answer in time" in caplog.text, error
        assert silent_server in caplog.text
        # After the 2 s read timeout, not before; the upper bound is 10x loose (not a hang).
        assert 1.5 < waited < 10 * 2.0, f"the error came after {waited:.1f} s (read timeout 2 s)"
        await client.hangup()


def test_a_retried_reply_bars_its_end_on_the_server_too(models, llm_server):
    """The retry of a reply that ended with no words sends ``min_tokens`` (in ``extra_body``):
    llama_cpp.server takes it and does not end the reply before, where a plain request ends after
    one word."""
    from gateway.models.base import ChatMessage, GenerationOptions

    _config, http = http_models(models, llm_server)
    llm = http.llm
    try:
        messages = [ChatMessage("user", "Answer with one word only, yes or no: is water wet?")]
        short = llm.generate(messages, 30, lambda: False, lambda piece: None, GenerationOptions())
        barred = llm.generate(messages, 30, lambda: False, lambda piece: None, GenerationOptions(min_tokens=8))
        assert short.finish_reason == "stop" and short.tokens < 8, short
        assert barred.tokens >= 8, barred
    finally:
        llm.close()  # type: ignore[attr-defined]
