"""The demo page shows every transcript the gateway sends, in conversation order, when the caller
pauses mid-sentence.

A pause longer than the VAD's silence (500 ms by default) splits what the caller says into several
committed user items, each with its own ``conversation.item.input_audio_transcription.completed``;
the gateway answers after the last part. When transcription takes longer than the pause (a loaded
machine: 1.9 s for one short turn was seen on two busy cores), the next part's ``speech_started``
comes before the previous part's transcript. The page used to reuse "the empty user line at the
bottom" for it and so showed two user lines for four transcripts; the slow-STT case reproduces
that every time, by running the real Whisper behind a delay.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gateway.models.base import ModelSet
from tests.browser.conftest import LEAD_SILENCE_S, TRAIL_SILENCE_S, console_collector, launch_chromium, write_wav
from tests.doubles import SlowSpeechToTextDouble
from tests.helpers import serve, words

# Slow (~40 s for both): the demo page's transcript order, a regression check CI runs with -m slow.
pytestmark = [pytest.mark.browser, pytest.mark.slow]

# One request, said in four parts with a breath between them.
PARTS = ["My name is Anna.", "I live in a small flat.", "I have a balcony.", "What flowers could I grow there?"]
PAUSE_S = 0.8

VIEWPORT = {"width": 1280, "height": 960}

# Once the caller has said everything: no speech is still open, every committed user item has its
# transcription result, and a response finished after the last commit (the gateway may also have
# started answering in a pause, and been interrupted by the next part).
TURN_HANDLED_JS = """() => {
  const events = window.vg.events;
  const types = events.map((e) => e.type);
  const committed = events.filter((e) => e.type === 'input_audio_buffer.committed').map((e) => e.item_id);
  const results = new Set(events.filter((e) => e.type === 'conversation.item.input_audio_transcription.completed'
    || e.type === 'conversation.item.input_audio_transcription.failed').map((e) => e.item_id));
  const lastCommit = types.lastIndexOf('input_audio_buffer.committed');
  return lastCommit >= 0 && types.lastIndexOf('input_audio_buffer.speech_started') < lastCommit
    && committed.every((id) => results.has(id))
    && types.slice(lastCommit).includes('response.done');
}"""

PAGE_LINES_JS = """() => [...document.querySelectorAll('#transcript .msg')].map((el) => ({
  role: el.classList.contains('user') ? 'user' : 'assistant',
  item_id: el.dataset.itemId || null,
  response_id: el.dataset.responseId || null,
  text: el.textContent,
}))"""


def overlapping_parts(events: list[dict]) -> bool:
    """Some ``speech_started`` arrived while a committed user item still awaited its transcript."""
    awaiting: set[str] = set()
    for event in events:
        if event["type"] == "input_audio_buffer.speech_started" and awaiting:
            return True
        if event["type"] == "input_audio_buffer.committed":
            awaiting.add(event["item_id"])
        elif (
            event["type"].startswith("conversation.item.input_audio_transcription.")
            and event["type"] != "conversation.item.input_audio_transcription.delta"
        ):
            awaiting.discard(event["item_id"])
    return False


def spoken_parts(speech: Callable[[str], np.ndarray]) -> np.ndarray:
    """int16 48 kHz mono: ``PARTS`` spoken one after the other, ``PAUSE_S`` of silence between them."""
    pause = np.zeros(int(PAUSE_S * 48000), np.int16)
    voiced: list[np.ndarray] = []
    for index, part in enumerate(PARTS):
        voiced += [pause, speech(part)] if index else [speech(part)]
    return np.concatenate(voiced)


@pytest.fixture
async def chromium_paused(
    chromium_path: Path, speech: Callable[[str], np.ndarray], tmp_path: Path
) -> AsyncIterator[Any]:
    """Chromium whose microphone says ``PARTS`` (after ``LEAD_SILENCE_S``), then stays silent."""
    rate = 48000
    samples = np.concatenate(
        [
            np.zeros(int(LEAD_SILENCE_S * rate), np.int16),
            spoken_parts(speech),
            np.zeros(int(TRAIL_SILENCE_S * rate), np.int16),
        ]
    )
    wav = tmp_path / "paused_caller.wav"
    write_wav(wav, samples, rate)
    async with launch_chromium(chromium_path, wav) as browser:
        yield browser


# 0: transcripts usually come within the pause; 1 s: each comes after the next part has begun.
@pytest.mark.parametrize("stt_delay_s", [0.0, 1.0], ids=["stt-as-is", "stt-slower-than-the-pause"])
async def test_every_transcript_shown_in_order(
    chromium_path: Path,
    models: ModelSet,
    speech: Callable[[str], np.ndarray],
    gateway_config: Any,
    chromium_paused: Any,
    artifacts: Path,
    stt_delay_s: float,
) -> None:
    log: list[str] = []
    if stt_delay_s:
        models = dataclasses.replace(models, stt=SlowSpeechToTextDouble(models.stt, stt_delay_s))
    # The microphone starts playing the file when the page opens it (on Connect).
    speaking_ms = int((LEAD_SILENCE_S + len(spoken_parts(speech)) / 48000) * 1000)
    async with serve(gateway_config(pool_size=1), models) as (url, _app):
        page = await chromium_paused.new_page(viewport=VIEWPORT)
        console_collector(page, log)
        try:
            await page.goto(url + "/", timeout=15_000)
            clicked = time.monotonic()
            await page.click("#connect")
            await page.wait_for_selector("#status[data-state='connected']", timeout=20_000)
            await page.wait_for_timeout(max(0, speaking_ms - int((time.monotonic() - clicked) * 1000)))
            await page.wait_for_function(TURN_HANDLED_JS, timeout=120_000)
            await page.screenshot(path=str(artifacts / "paused_caller.png"))

            events = await page.evaluate("() => window.vg.events")
            lines = await page.evaluate(PAGE_LINES_JS)
            (artifacts / "events.json").write_text(json.dumps(events, indent=1))
            (artifacts / "lines.txt").write_text("\n".join(f"{line['role']}: {line['text']}" for line in lines))

            committed = [e["item_id"] for e in events if e["type"] == "input_audio_buffer.committed"]
            completed = {
                e["item_id"]: e["transcript"].strip()
                for e in events
                if e["type"] == "conversation.item.input_audio_transcription.completed"
            }
            # Commit order is conversation order; an empty transcript (a VAD false positive) has no line.
            sent = [{"item_id": item, "text": completed[item]} for item in committed if completed.get(item)]
            assert len(sent) >= 2, f"the pauses did not split the turn: {sent}"
            heard = words(" ".join(s["text"] for s in sent))
            assert len(heard) >= len(words(" ".join(PARTS))) // 2, sent  # the parts were understood

            if stt_delay_s:
                # The case under test: a part began before the previous part's transcript came.
                assert overlapping_parts(events), "no part's speech_started came before the previous transcript"

            shown = [{"item_id": line["item_id"], "text": line["text"]} for line in lines if line["role"] == "user"]
            assert shown == sent, f"user lines on the page {shown} != transcripts the gateway sent {sent}"

            # The answer comes after the caller's last part.
            answered = [e["response"]["id"] for e in events if e["type"] == "response.done"]
            position = {line["response_id"]: index for index, line in enumerate(lines) if line["response_id"]}
            last_user = max(index for index, line in enumerate(lines) if line["role"] == "user")
            assert position.get(answered[-1], -1) > last_user, lines
        except BaseException:
            await page.screenshot(path=str(artifacts / "failure.png"))
            raise
        finally:
            (artifacts / "console.log").write_text("\n".join(log))
            await page.close()
