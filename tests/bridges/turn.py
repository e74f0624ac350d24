"""The spoken turn every bridge test makes, seen on the call's sideband WebSocket."""

from __future__ import annotations

from tests.helpers import QUESTION, says
from tests.transports.websocket.ws_client import EventClient


async def answered_question(url: str, call_id: str) -> str:
    """Wait, on the sideband of the gateway call ``call_id`` (``GET /v1/realtime?call_id=``), for
    the caller's :data:`~tests.helpers.QUESTION` to be transcribed, the response to complete and
    its audio to be played out; returns what the reply said (its audio transcript)."""
    async with EventClient(url, query=f"?call_id={call_id}") as control:
        heard = await control.wait_for("conversation.item.input_audio_transcription.completed", within=60)
        assert says(heard["transcript"], QUESTION), heard["transcript"]
        done = await control.wait_for("response.done", within=90)
        assert done["response"]["status"] == "completed", done
        await control.wait_for("output_audio_buffer.stopped", within=60)
        return str(control.of_type("response.output_audio_transcript.done")[-1]["transcript"])
