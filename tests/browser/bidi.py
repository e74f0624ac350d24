"""A minimal WebDriver BiDi client for Firefox, which speaks BiDi itself on its remote-debugging
port: no geckodriver (not packaged by Debian, and its installers download from the internet) and
no Playwright (which needs its own patched Firefox build).

Only the few commands the browser tests use: evaluate script, click with user activation, set the
viewport, take a screenshot, add a preload script.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Optional

import aiohttp

# Prefs for an unattended test profile. The remote agent already applies its "recommended" prefs
# (no updates, telemetry or first-run pages); these add what a WebRTC call page needs.
FIREFOX_PREFS = {
    "media.navigator.permission.disabled": True,  # getUserMedia without a prompt
    "media.navigator.streams.fake": True,  # no real capture device is needed
    "media.autoplay.default": 0,  # let the page's <audio> play the answer
    # No sound server here: without a (mock) audio backend an AudioContext never leaves
    # "suspended" and the audio graph never runs.
    "media.cubeb.force_mock_context": True,
    "media.autoplay.blocking_policy": 0,
    # The gateway listens on loopback: offer loopback candidates, and real addresses rather than
    # mDNS names (which the gateway's ICE agent would have to resolve).
    "media.peerconnection.ice.loopback": True,
    "media.peerconnection.ice.obfuscate_host_addresses": False,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "browser.safebrowsing.update.enabled": False,
}


class BiDiError(RuntimeError):
    """A command answered with a BiDi error."""


class Firefox:
    """One headless Firefox and one BiDi session on it (``Firefox.launch`` makes both)."""

    def __init__(
        self, process: asyncio.subprocess.Process, http: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse
    ) -> None:
        self.process = process
        self._http = http
        self._ws = ws
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._reader = asyncio.ensure_future(self._read())
        self.context: Optional[str] = None  # the top-level browsing context (tab)

    @classmethod
    @contextlib.asynccontextmanager
    async def launch(
        cls, executable: str, profile: Path, port: int, log: Path, timeout: float = 30.0
    ) -> AsyncIterator[Firefox]:
        """Start ``executable`` headless on a fresh ``profile`` and open a BiDi session."""
        profile.mkdir(parents=True, exist_ok=True)
        (profile / "user.js").write_text(
            "".join(f"user_pref({json.dumps(k)}, {json.dumps(v)});\n" for k, v in FIREFOX_PREFS.items())
        )
        with open(log, "wb") as out:
            process = await asyncio.create_subprocess_exec(
                executable,
                "--headless",
                "--no-remote",
                "--profile",
                str(profile),
                "--remote-debugging-port",
                str(port),
                "about:blank",
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        http = aiohttp.ClientSession()
        browser: Optional[Firefox] = None
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while True:  # the BiDi endpoint comes up a few seconds after the process
                try:
                    ws = await http.ws_connect(f"ws://127.0.0.1:{port}/session", max_msg_size=0)
                    break
                except aiohttp.ClientError:
                    if process.returncode is not None or loop.time() > deadline:
                        raise RuntimeError(f"Firefox did not open WebDriver BiDi on port {port} (see {log})") from None
                    await asyncio.sleep(0.25)
            browser = cls(process, http, ws)
            await browser.command("session.new", {"capabilities": {}})
            tree = await browser.command("browsingContext.getTree", {"maxDepth": 0})
            browser.context = tree["contexts"][0]["context"]
            yield browser
        finally:
            if browser is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(browser.command("browser.close", {}), 5)
                browser._reader.cancel()
                await browser._ws.close()
            await http.close()
            await _stop(process)

    async def _read(self) -> None:
        async for message in self._ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(message.data)
            future = self._pending.pop(data.get("id"), None)
            if future is not None and not future.done():
                future.set_result(data)
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionError("Firefox closed the BiDi connection"))

    async def command(self, method: str, params: dict, timeout: float = 30.0) -> dict:
        """Send one command; its ``result``, or BiDiError."""
        command_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[command_id] = future
        await self._ws.send_str(json.dumps({"id": command_id, "method": method, "params": params}))
        try:
            answer = await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(command_id, None)
        if answer.get("type") == "error":
            raise BiDiError(f"{method}: {answer.get('error')}: {answer.get('message')}")
        return answer["result"]

    async def evaluate(self, expression: str, user_activation: bool = False) -> Any:
        """Evaluate JS in the page (promises awaited); the value must survive JSON.stringify."""
        result = await self.command(
            "script.evaluate",
            {
                "expression": f"(async () => JSON.stringify(await ({expression})))()",
                "target": {"context": self.context},
                "awaitPromise": True,
                "userActivation": user_activation,
            },
        )
        if result["type"] == "exception":
            raise BiDiError(f"script error: {result['exceptionDetails'].get('text')}")
        value = result["result"]
        return json.loads(value["value"]) if value.get("type") == "string" else None

    async def wait_for(self, expression: str, timeout: float, interval: float = 0.2) -> Any:
        """Poll ``expression`` until it is truthy; its value, or TimeoutError naming it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if loop.time() > deadline:
                raise TimeoutError(f"{timeout} s waiting for: {expression}")
            await asyncio.sleep(interval)

    async def navigate(self, url: str) -> None:
        await self.command("browsingContext.navigate", {"context": self.context, "url": url, "wait": "complete"})

    async def set_viewport(self, width: int, height: int) -> None:
        await self.command(
            "browsingContext.setViewport", {"context": self.context, "viewport": {"width": width, "height": height}}
        )

    async def add_preload_script(self, function_declaration: str) -> None:
        """Run this JS function in every new document, before the page's own scripts."""
        await self.command("script.addPreloadScript", {"functionDeclaration": function_declaration})

    async def screenshot(self, path: Path) -> None:
        result = await self.command("browsingContext.captureScreenshot", {"context": self.context})
        path.write_bytes(base64.b64decode(result["data"]))


async def _stop(process: asyncio.subprocess.Process) -> None:
    """End Firefox and its child processes (its own process group), politely first."""
    if process.returncode is not None:
        return
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            await asyncio.wait_for(process.wait(), wait)
            return
        except TimeoutError:
            continue
