"""The demo page in headless Firefox (Debian's firefox-esr) completes a spoken turn.

Firefox is driven over WebDriver BiDi (tests/browser/bidi.py). It has no equivalent of Chromium's
file-fed fake microphone (its fake device plays a tone), so a preload script replaces
``getUserMedia`` with a WebAudio stream of the same spoken question; everything after the
microphone — Firefox's RTCPeerConnection, Opus, the data channel, the page — is the real thing.
"""

from __future__ import annotations

import base64
import io
import json
import re

import numpy as np
import pytest

from gateway.media.resample import Resampler
from tests.browser.bidi import Firefox
from tests.browser.conftest import INBOUND_AUDIO_JS, QUESTION, heard_the_question, write_wav
from tests.helpers import app_idle, free_port, serve, wait_until

pytestmark = pytest.mark.browser

# Replaces getUserMedia({audio}) with the WAV (base64, filled in below) played once into a
# MediaStream, then silence, the way a person asks one question and waits for the answer.
FAKE_MICROPHONE_JS = """() => {
  const wav = Uint8Array.from(atob('%s'), (c) => c.charCodeAt(0));
  const real = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
  navigator.mediaDevices.getUserMedia = async (constraints) => {
    if (!constraints || !constraints.audio || constraints.video) return real(constraints);
    const ctx = new AudioContext();
    await ctx.resume();
    const source = ctx.createBufferSource();
    source.buffer = await ctx.decodeAudioData(wav.buffer.slice(0));
    const sink = ctx.createMediaStreamDestination();
    source.connect(sink);
    source.start(ctx.currentTime + 0.2);
    return sink.stream;
  };
}"""


def question_wav_16k(speech) -> bytes:
    """1 s of silence, the question, 3 s of silence: 16 kHz mono WAV bytes (kept small, as the
    preload script carries it inline)."""
    resampler = Resampler(16000)
    voice = np.concatenate([resampler.resample_array(speech(QUESTION), 48000), resampler.flush()])
    samples = np.concatenate([np.zeros(16000, np.int16), voice.astype(np.int16), np.zeros(48000, np.int16)])
    buffer = io.BytesIO()
    write_wav(buffer, samples, 16000)
    return buffer.getvalue()


async def test_firefox_demo_page_spoken_turn(firefox_path, models, speech, gateway_config, artifacts, tmp_path):
    wav = base64.b64encode(question_wav_16k(speech)).decode()
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        async with Firefox.launch(
            str(firefox_path), tmp_path / "profile", free_port(), artifacts / "firefox.log"
        ) as firefox:
            try:
                await firefox.add_preload_script(FAKE_MICROPHONE_JS % wav)
                await firefox.set_viewport(1280, 800)
                await firefox.navigate(url + "/")
                await firefox.evaluate("document.getElementById('connect').click()", user_activation=True)
                await firefox.wait_for("document.getElementById('status').dataset.state === 'connected'", 20)

                user = await firefox.wait_for(
                    "document.querySelector(\".msg.user[data-status='done']\")?.textContent", 60
                )
                assert heard_the_question(user), user
                await firefox.wait_for("window.vg.events.some(e => e.type === 'output_audio_buffer.started')", 60)
                before = await firefox.evaluate(f"({INBOUND_AUDIO_JS})(window.vg.pc)")
                answer = await firefox.wait_for(
                    "document.querySelector(\".msg.assistant[data-status='done']\")?.textContent", 60
                )
                assert answer.strip()
                v2v = await firefox.wait_for(
                    "/\\d/.test(document.getElementById('latency-v2v').textContent) && "
                    "document.getElementById('latency-v2v').textContent",
                    30,
                )
                assert re.fullmatch(r"\d+ ms", v2v.strip()), v2v

                await firefox.wait_for("window.vg.events.some(e => e.type === 'output_audio_buffer.stopped')", 60)
                element = await firefox.evaluate("""(() => {
                    const a = document.getElementById('remote-audio');
                    const t = a.srcObject && a.srcObject.getAudioTracks()[0];
                    return { paused: a.paused, track: t ? t.readyState : null };
                })()""")
                assert element == {"paused": False, "track": "live"}, element
                after = await firefox.evaluate(f"({INBOUND_AUDIO_JS})(window.vg.pc)")
                (artifacts / "inbound_audio.json").write_text(json.dumps({"started": before, "stopped": after}))
                assert after["bytes"] - before["bytes"] > 5_000, (before, after)
                assert after["energy"] - before["energy"] > 1e-3, (before, after)  # audible, not silence
                await firefox.screenshot(artifacts / "firefox.png")

                await firefox.evaluate("document.getElementById('hangup').click()", user_activation=True)
                await firefox.wait_for("document.getElementById('status').dataset.state === 'idle'", 5)
                assert await wait_until(lambda: app_idle(app), 10), "the unit did not return to idle"
            except BaseException:
                await firefox.screenshot(artifacts / "failure.png")
                raise
