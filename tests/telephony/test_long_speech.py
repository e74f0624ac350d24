"""Long speech (an IVR prompt played by a bridge, a caller who talks on and on): a turn longer than
``max_utterance_s`` is committed in pieces as it goes, and the pieces together hold the whole
transcript; the caller is answered once, after the last piece.

Known gap: a cut is reported as the end of a turn, so when it lands in a pause longer
than the piece takes to transcribe, a reply starts and is cancelled when the caller goes on.
"""

from __future__ import annotations

import difflib
import re

import numpy as np
import pytest

from gateway.client import RealtimeClient
from tests.helpers import serve

PROMPT = (
    "Thank you for calling the city library. Our opening hours are nine to six on weekdays. "
    "On Saturdays we open at ten and close at four. Books can be renewed online or by phone. "
    "Late returns cost ten cents a day. The reading room is on the second floor. "
    "Children's story time is every Wednesday morning. Please have your library card ready."
)


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


@pytest.mark.slow
async def test_long_turn_is_transcribed_in_pieces_and_answered_once(models, speech, gateway_config):
    config = gateway_config(pool_size=1, max_utterance_s=8.0)
    sentences = [speech(sentence.strip() + ".") for sentence in PROMPT.split(".") if sentence.strip()]
    gap = np.zeros(48000 * 15 // 100, np.int16)  # 150 ms between sentences: one turn, no pause to end it
    audio = np.concatenate([part for sentence in sentences for part in (sentence, gap)])
    assert len(audio) / 48000 > 2 * config.max_utterance_s, len(audio) / 48000
    async with serve(config, models) as (url, _app):
        client = RealtimeClient(url)
        # Plain silence ends turns (not the semantic model, which would end one at each sentence),
        # after a pause longer than those between the sentences: only max_utterance_s cuts the turn.
        turn = {"type": "server_vad", "silence_duration_ms": 1500}
        assert await client.connect(session={"type": "realtime", "audio": {"input": {"turn_detection": turn}}}) == 201
        client.say(audio)
        deadline = len(audio) / 48000 + 90
        count = 1
        # A cut that lands in a pause between sentences can start a reply before the caller goes
        # on (it is then barged into and cancelled): wait for the reply that is not cancelled.
        while (await client.wait_for("response.done", timeout=deadline, count=count))["response"][
            "status"
        ] == "cancelled":
            count += 1
        transcripts = [e["transcript"] for e in client.of_type("conversation.item.input_audio_transcription.completed")]
        assert len(transcripts) >= 2, transcripts  # committed in pieces
        heard = " ".join(transcripts)
        ratio = difflib.SequenceMatcher(None, words(heard), words(PROMPT)).ratio()
        assert ratio >= 0.85, (ratio, heard)
        answered = [e for e in client.of_type("response.done") if e["response"]["status"] != "cancelled"]
        assert len(answered) == 1  # one answer, after the last piece
        await client.hangup()
