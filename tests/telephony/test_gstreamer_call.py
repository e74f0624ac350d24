"""A second, independent WebRTC stack places a bridge-like call: GStreamer's ``webrtcbin``
(libnice ICE, its own DTLS with an RSA certificate, SRTP) offers PCMU and telephone-event only,
with no data channel, asks a question by voice, records the spoken reply, then sends RFC 4733
digits on the voice SSRC. The reply is transcribed with the real STT model, and the digits are
read off the call (a call with no data channel has no event channel to report them on).

The caller runs in the system python3 (python3-gst-1.0; ``scripts/setup.sh --browser`` installs
the Debian packages): ``tests/telephony/gst_caller.py``. Without them the test skips, except
under CI.
"""

from __future__ import annotations

import asyncio
import difflib
import re
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest

from gateway.media.resample import Resampler
from gateway.pipeline import events as pe
from gateway.server.app_keys import SESSIONS
from tests.helpers import QUESTION, serve, unavailable, wait_until

SYSTEM_PYTHON = "/usr/bin/python3"
CALLER = Path(__file__).with_name("gst_caller.py")


def require_gstreamer() -> None:
    probe = (
        "import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstWebRTC', '1.0'); "
        "from gi.repository import Gst; Gst.init(None); "
        "assert all(Gst.ElementFactory.find(n) for n in ('webrtcbin', 'rtpdtmfsrc', 'rtpdtmfmux', 'capssetter'))"
    )
    try:
        ok = subprocess.run([SYSTEM_PYTHON, "-c", probe], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        unavailable("GStreamer webrtcbin for the system python3 is missing (scripts/setup.sh --browser installs it)")


def write_wav(path: Path, samples: np.ndarray, rate: int) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples.astype("<i2").tobytes())


def read_wav_16k(path: Path) -> np.ndarray:
    with wave.open(str(path), "rb") as source:
        rate = source.getframerate()
        samples = np.frombuffer(source.readframes(source.getnframes()), "<i2").astype(np.int16)
    resampler = Resampler(16000)
    out = np.concatenate([resampler.resample_array(samples, rate), resampler.flush()])
    return out.astype(np.float32) / 32768.0


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


async def read_line(process: asyncio.subprocess.Process, prefix: str, within_s: float) -> str:
    """The next stdout line of the caller that starts with ``prefix`` (a FAILED line fails the test)."""
    assert process.stdout is not None
    while True:
        line = (await asyncio.wait_for(process.stdout.readline(), within_s)).decode().strip()
        assert line, f"the GStreamer caller ended before {prefix}"
        assert not line.startswith("FAILED"), line
        if line.startswith(prefix):
            return line


@pytest.mark.slow
async def test_gstreamer_pcmu_call_is_answered_and_its_digits_reported(models, speech, gateway_config, tmp_path):
    require_gstreamer()
    asked = QUESTION
    question = np.concatenate(
        [np.zeros(48000, np.int16), speech(asked), np.zeros(48000 * 20, np.int16)]
    )  # then silence while the reply plays
    question_wav, reply_wav = tmp_path / "question.wav", tmp_path / "reply.wav"
    write_wav(question_wav, question, 48000)
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        seen: list[pe.PipelineEvent] = []
        metrics_sink = app[SESSIONS].on_event
        app[SESSIONS].on_event = lambda event: (seen.append(event), metrics_sink(event))
        caller = await asyncio.create_subprocess_exec(
            SYSTEM_PYTHON,
            str(CALLER),
            url,
            str(question_wav),
            str(reply_wav),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert caller.stdin is not None
        try:
            call_id = (await read_line(caller, "ANSWERED", 30)).split()[1]
            await read_line(caller, "CONNECTED", 30)
            call = app[SESSIONS].sessions[call_id]
            assert call.transport.channel is None  # voice only: no data channel was offered
            answered = await wait_until(lambda: any(isinstance(e, pe.PlaybackStopped) for e in seen), 120, 0.2)
            assert answered, [type(e).__name__ for e in seen]
            caller.stdin.write(b"DTMF 15#\n")
            await read_line(caller, "DTMF_SENT", 10)
            assert await wait_until(lambda: call.key_presses == ["1", "5", "#"], 5), call.key_presses
            await asyncio.sleep(0.5)  # no late duplicate
            assert call.key_presses == ["1", "5", "#"]
            caller.stdin.write(b"STOP\n")
            recorded_s = float((await read_line(caller, "STOPPED", 10)).split()[1])
            assert await asyncio.wait_for(caller.wait(), 10) == 0
        finally:
            if caller.returncode is None:
                caller.kill()
                await caller.wait()
        heard_question = next(e.transcript for e in seen if isinstance(e, pe.TranscriptionCompleted))
        # Heard through G.711 at 8 kHz (a word or so may go).
        assert difflib.SequenceMatcher(None, words(heard_question), words(asked)).ratio() >= 0.6, heard_question
        said = " ".join(e.text for e in seen if isinstance(e, pe.ResponseFinished))
        assert said.strip() and recorded_s > 3
        heard_reply = models.stt.transcribe(read_wav_16k(reply_wav))  # the G.711 reply, as the caller heard it
        similarity = difflib.SequenceMatcher(None, words(heard_reply), words(said)).ratio()
        assert similarity >= 0.6, (heard_reply, said)
        await app[SESSIONS].hangup(call_id)
