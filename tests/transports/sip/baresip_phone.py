"""Debian's baresip as the caller in the tests: a softphone started as the test's own process, with
a temporary config that binds only to 127.0.0.1, plays a WAV (``aufile``), records what it hears
(``sndfile``: the decoded audio of the call) and takes commands over ``ctrl_tcp`` (netstring JSON:
``dial``, ``sndcode``, ``hangup``; events such as ``CALL_ESTABLISHED`` come back the same way).

Needs the ``baresip-core`` package (``scripts/setup.sh --services``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
import struct
import wave
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pytest

from gateway.media.resample import Resampler
from gateway.models.base import SpeechToText
from gateway.server.runner import free_port
from tests.ops.services import tied_to_this_process

BARESIP = shutil.which("baresip") or "/usr/bin/baresip"
MODULES = Path("/usr/lib/baresip/modules")


def require_baresip() -> None:
    """Fail (not skip: CI installs it) with what to install when baresip is missing."""
    if not Path(BARESIP).exists() or not (MODULES / "ctrl_tcp.so").exists():
        pytest.fail("baresip is not installed: scripts/setup.sh --services (Debian package baresip-core)")


def write_wav(path: Path, samples: np.ndarray, rate: int, channels: int = 1) -> None:
    """int16 mono ``samples`` at ``rate`` Hz as a WAV file of ``channels`` (each the same)."""
    with wave.open(str(path), "wb") as out:
        out.setnchannels(channels)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(np.repeat(samples.astype("<i2"), channels).tobytes())


def microphone(speech: np.ndarray, tail_s: float = 40.0) -> np.ndarray:
    """A phone's microphone: 1 s of silence, ``speech`` (int16 mono 8 kHz), ``tail_s`` of silence."""
    return np.concatenate([np.zeros(8000, np.int16), speech, np.zeros(int(8000 * tail_s), np.int16)])


def transcribed(stt: SpeechToText, samples: np.ndarray, rate: int) -> str:
    """``samples`` (int16 mono at ``rate`` Hz) transcribed by ``stt``, at 16 kHz."""
    resampler = Resampler(16000)
    audio = np.concatenate([resampler.resample_array(samples, rate), resampler.flush()])
    return stt.transcribe(audio.astype(np.float32) / 32768)


HEARD_PAST_S = 0.8  # audio the phone decodes after the reply's last frame left, before hanging up


def read_wav(path: Path) -> tuple[np.ndarray, int]:
    """A 16-bit WAV file as int16 mono (channels averaged) and its rate."""
    with wave.open(str(path), "rb") as source:
        samples = np.frombuffer(source.readframes(source.getnframes()), "<i2")
        channels = source.getnchannels()
        rate = source.getframerate()
    if channels > 1:
        samples = samples.reshape(-1, channels).mean(axis=1)
    return samples.astype(np.int16), rate


def sip_listen_port() -> int:
    """A port P for baresip's ``sip_listen``: it listens on P (UDP and TCP) and on P + 1 (its SIP/TLS
    transport, whatever the account uses). A plain free port failed a CI run when P + 1 was taken:
    "SIP/TLS transport failed: Address already in use", and baresip never started."""
    for _ in range(100):
        port = free_port()
        if port < 65535 and all(_bindable(kind, number) for kind, number in _listens(port)):
            return port
    raise RuntimeError("no free port pair for baresip")


def _listens(port: int) -> tuple[tuple[int, int], ...]:
    return ((socket.SOCK_DGRAM, port), (socket.SOCK_STREAM, port), (socket.SOCK_STREAM, port + 1))


def _bindable(kind: int, port: int) -> bool:
    with socket.socket(socket.AF_INET, kind) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class BaresipPhone:
    """``async with BaresipPhone(folder, play=samples_8k) as phone``: a running baresip whose
    microphone is ``play`` (int16 mono at ``rate`` Hz: 8000, or 48000 for a wideband phone) and
    whose call audio is recorded under ``folder``.
    ``codecs`` are the audio codec modules it loads, in its order of preference (``g711``:
    PCMU and PCMA; ``opus``: opus/48000/2); ``mediaenc`` its account's media encryption
    (``srtp``: RTP/AVP with ``a=crypto``, best effort; ``srtp-mand``: RTP/SAVP, SRTP or nothing;
    ``""``: plain RTP)."""

    def __init__(
        self,
        folder: Path,
        play: np.ndarray,
        *,
        transport: str = "udp",
        cafile: Optional[Path] = None,
        codecs: tuple[str, ...] = ("g711",),
        mediaenc: str = "",
        rate: int = 8000,
    ) -> None:
        self.folder = folder
        self.play = play
        self.rate = rate
        self.cafile = cafile  # CA (or self-signed certificate) a TLS server is checked against
        self.codecs = codecs
        self.mediaenc = mediaenc
        self.sip_port = sip_listen_port()
        self.control_port = free_port()
        self.transport = transport
        self.events: list[dict[str, Any]] = []
        self.responses: dict[str, dict[str, Any]] = {}
        self._process: Optional[asyncio.subprocess.Process] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._reader_task: Optional[asyncio.Task[None]] = None
        self._token = 0
        self._changed = asyncio.Event()

    def _write_config(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        # baresip runs Opus as opus/48000/2 and its aufile source must have the codec's channels
        write_wav(self.folder / "microphone.wav", self.play, self.rate, channels=2 if "opus" in self.codecs else 1)
        (self.folder / "config").write_text(
            "\n".join(
                [
                    "poll_method epoll",
                    f"sip_listen 127.0.0.1:{self.sip_port}",
                    f"audio_source aufile,{self.folder / 'microphone.wav'}",
                    "audio_player aubridge,nowhere",
                    "audio_alert aubridge,nowhere",
                    f"ausrc_srate {self.rate}",
                    "auplay_srate 8000",
                    "audio_level no",
                    "rtp_ports 30000-39999",
                    "net_interface 127.0.0.1",
                    f"module_path {MODULES}",
                    *(f"module {codec}.so" for codec in self.codecs),
                    *(["module srtp.so"] if self.mediaenc else []),
                    "module aufile.so",
                    "module aubridge.so",
                    "module sndfile.so",
                    "module_app account.so",
                    "module_app menu.so",
                    "module_app ctrl_tcp.so",
                    f"ctrl_tcp_listen 127.0.0.1:{self.control_port}",
                    f"snd_path {self.folder}",
                    *([f"sip_cafile {self.cafile}"] if self.cafile else []),
                    "",
                ]
            )
        )
        mediaenc = f";mediaenc={self.mediaenc}" if self.mediaenc else ""
        (self.folder / "accounts").write_text(f"<sip:caller@127.0.0.1;transport={self.transport}>;regint=0{mediaenc}\n")

    async def __aenter__(self) -> BaresipPhone:
        require_baresip()
        self._write_config()
        log = open(self.folder / "baresip.log", "wb")
        self._process = await asyncio.create_subprocess_exec(
            *tied_to_this_process([BARESIP, "-f", str(self.folder)]),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        log.close()
        for _ in range(100):
            try:
                reader, self._writer = await asyncio.open_connection("127.0.0.1", self.control_port)
                break
            except OSError:
                await asyncio.sleep(0.1)
        else:
            raise RuntimeError(f"baresip did not open ctrl_tcp: {self.log()[-2000:]}")
        self._reader_task = asyncio.ensure_future(self._read(reader))
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.command("quit"), 3)
        if self._writer is not None:
            self._writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
        if self._process is not None and self._process.returncode is None:
            try:
                await asyncio.wait_for(self._process.wait(), 5)
            except TimeoutError:
                self._process.kill()
                await self._process.wait()

    def log(self) -> str:
        """baresip's console output so far."""
        return (self.folder / "baresip.log").read_text(errors="replace")

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while True:
            length = await reader.readuntil(b":")
            data = await reader.readexactly(int(length[:-1]) + 1)
            message = json.loads(data[:-1])
            if message.get("event"):
                self.events.append(message)
            elif message.get("response"):
                self.responses[str(message.get("token"))] = message
            self._changed.set()

    async def command(self, command: str, params: str = "") -> dict[str, Any]:
        """Run a baresip command; its response (``ok``, ``data``)."""
        assert self._writer is not None
        self._token += 1
        token = str(self._token)
        body = json.dumps({"command": command, "params": params, "token": token}).encode()
        self._writer.write(str(len(body)).encode() + b":" + body + b",")
        await self._writer.drain()
        await self._wait(lambda: token in self.responses, 10)
        return self.responses[token]

    async def _wait(self, predicate: Any, within: float) -> None:
        async def wait() -> None:
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(wait(), within)

    async def event(self, kind: str, within: float = 15) -> dict[str, Any]:
        """The first event of type ``kind`` (``CALL_ESTABLISHED``, ``CALL_CLOSED``...)."""
        await self._wait(lambda: any(e.get("type") == kind for e in self.events), within)
        return next(e for e in self.events if e.get("type") == kind)

    def recording(self) -> tuple[np.ndarray, int]:
        """What the phone heard (sndfile's decoded-audio file), int16 mono and its rate (the
        call codec's: 8000 for G.711, 48000 for Opus)."""
        files = sorted(self.folder.glob("dump-*-dec.wav"))
        assert files, f"no recording in {self.folder}: {sorted(p.name for p in self.folder.iterdir())}"
        return read_wav(files[-1])

    async def converse(self, url: str, call_id: str, question: str, press: str = "") -> str:
        """Over a sideband of the answered call ``call_id``: the phone's ``question`` is heard
        (its transcript says it, one content word allowed to go: over a phone's 8 kHz leg Whisper
        base wrote "What is the capital of friends?" on an AVX-512 box, "France" on AVX2 ones),
        answered to the end of its audio, then the keys ``press`` are pressed and seen (RFC 4733 or
        SIP INFO, as the phone sends them). Returns what the model said."""
        from tests.transports.websocket.ws_client import EventClient

        async with EventClient(url, query=f"?call_id={call_id}") as control:
            said = await control.answered_turn(question, misses=1)
            played_to = self._recorded_s()
            if press:
                assert (await self.command("sndcode", press))["ok"]
                await control.wait_for("input_audio_buffer.dtmf_event_received", timeout=10, count=len(press))
                digits = [e["event"] for e in control.of_type("input_audio_buffer.dtmf_event_received")]
                assert digits == list(press), digits
        # ``output_audio_buffer.stopped`` says the gateway sent its last frame; the phone's jitter
        # buffer plays it later. A CI run hung up first and the recording lost the reply's last
        # word ("The capital of France is" + nothing): wait until the phone has decoded well past it.
        for _ in range(300):  # at most 15 s
            if self._recorded_s() >= played_to + HEARD_PAST_S:
                break
            await asyncio.sleep(0.05)
        return said

    def _recorded_s(self) -> float:
        """Seconds of audio in the phone's decoded-audio file so far (it grows while it writes;
        the header's size fields are only final at hang-up, so the file size counts)."""
        files = sorted(self.folder.glob("dump-*-dec.wav"))
        if not files:
            return 0.0
        with open(files[-1], "rb") as source:
            header = source.read(44)
        if len(header) < 44:
            return 0.0
        channels, rate = struct.unpack_from("<HI", header, 22)
        return max(0, files[-1].stat().st_size - 44) / (2 * channels * rate)

    def heard(self, stt: SpeechToText) -> str:
        """What the phone heard (:meth:`recording`), transcribed by ``stt``."""
        return transcribed(stt, *self.recording())
