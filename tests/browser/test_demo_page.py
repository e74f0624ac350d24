"""The demo page in a real headless Chromium completes a spoken turn.

The fake microphone (a WAV file) asks the question; the page shows both transcripts and the
latency, and its audio element receives the spoken answer.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.browser.conftest import INBOUND_AUDIO_JS, console_collector, heard_the_question
from tests.helpers import app_idle, serve, wait_until

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1280, "height": 960}

SETTINGS_JS = """() => ({
  instructions: document.getElementById('instructions').value, voice: document.getElementById('voice').value,
  threshold: document.getElementById('vad-threshold').value, silence: document.getElementById('silence-ms').value,
})"""


async def test_demo_page_spoken_turn(chromium_path, models, gateway_config, chromium, artifacts):
    log: list[str] = []
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        page = await chromium.new_page(viewport=VIEWPORT)
        console_collector(page, log)
        try:
            await page.goto(url + "/", timeout=15_000)
            await page.click("#connect")
            await page.wait_for_selector("#status[data-state='connected']", timeout=20_000)

            # Settings shows the session the gateway reported, not defaults of the page's own.
            await page.wait_for_function("window.vg.events.some(e => e.type === 'session.created')", timeout=10_000)
            session = await page.evaluate("window.vg.events.find(e => e.type === 'session.created').session")
            turn = session["audio"]["input"]["turn_detection"]
            shown = await page.evaluate(SETTINGS_JS)
            assert shown == {
                "instructions": session["instructions"],
                "voice": session["audio"]["output"]["voice"],
                "threshold": str(turn["threshold"]),
                "silence": str(turn["silence_duration_ms"]),
            }, shown

            # The fake microphone asks the question; the page shows what the gateway understood.
            user = await page.wait_for_selector(".msg.user[data-status='done']", timeout=60_000)
            assert heard_the_question(await user.text_content()), await user.text_content()

            # Mid-reply: the assistant is speaking (its indicator is on) and the latency is shown.
            await page.wait_for_function(
                "window.vg.events.some(e => e.type === 'output_audio_buffer.started')", timeout=60_000
            )
            pc = await page.evaluate_handle("() => window.vg.pc")
            before = await page.evaluate(INBOUND_AUDIO_JS, pc)
            await page.wait_for_selector("#speaker-assistant[data-active='true']", timeout=5_000)
            await page.wait_for_timeout(700)  # let the indicator's fade-in finish for the picture
            await page.screenshot(path=str(artifacts / "speaking.png"))

            # The answer: its transcript in a finished assistant bubble, then the latency readout.
            answer = await page.wait_for_selector(".msg.assistant[data-status='done']", timeout=60_000)
            assert (await answer.text_content()).strip()
            await page.wait_for_function(
                "/\\d/.test(document.getElementById('latency-v2v').textContent)", timeout=30_000
            )
            v2v = await page.text_content("#latency-v2v")
            assert re.fullmatch(r"\d+ ms", v2v.strip()), v2v
            rows = await page.eval_on_selector_all(
                "#latency-table tbody tr", "rows => rows.map(r => r.querySelector('td').textContent)"
            )
            assert any(re.fullmatch(r"\d+ ms", cell) for cell in rows), rows

            # The audio element plays the answer: it holds the live remote track, and that track
            # carried audible (non-silent) audio while the gateway said it was speaking.
            await page.wait_for_function(
                "window.vg.events.some(e => e.type === 'output_audio_buffer.stopped')", timeout=60_000
            )
            element = await page.evaluate("""() => {
                const a = document.getElementById('remote-audio');
                const t = a.srcObject && a.srcObject.getAudioTracks()[0];
                return { paused: a.paused, track: t ? t.readyState : null };
            }""")
            assert element == {"paused": False, "track": "live"}, element
            after = await page.evaluate(INBOUND_AUDIO_JS, pc)
            (artifacts / "inbound_audio.json").write_text(json.dumps({"started": before, "stopped": after}))
            assert after["bytes"] - before["bytes"] > 5_000, (before, after)
            assert after["energy"] - before["energy"] > 1e-3, (before, after)  # audible, not silence

            await page.screenshot(path=str(artifacts / "demo.png"))

            # Apply sends a session.update: the changed silence, the rest of the server's turn detection.
            await page.click("#settings summary")
            await page.fill("#silence-ms", "650")
            await page.click("#apply-settings")
            await page.wait_for_function("window.vg.events.some(e => e.type === 'session.updated')", timeout=10_000)
            updated = await page.evaluate("window.vg.events.find(e => e.type === 'session.updated').session")
            assert updated["audio"]["input"]["turn_detection"] == {**turn, "silence_duration_ms": 650}, updated
            assert "Applied" in await page.text_content("#settings-note")

            await page.click("#hangup")
            await page.wait_for_selector("#status[data-state='idle']", timeout=5_000)
            assert await wait_until(lambda: app_idle(app), 10), "the unit did not return to idle"
        except BaseException:
            await page.screenshot(path=str(artifacts / "failure.png"))
            raise
        finally:
            (artifacts / "console.log").write_text("\n".join(log))
            await page.close()
