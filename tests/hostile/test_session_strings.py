"""Strings of a ``session.update`` that the gateway keeps and sends on: the transcription
``language`` (echoed in every ``session.updated``, handed to STT with every turn) and the voice
(handed to TTS with every sentence). Any string was taken: a 7 MB language set once came back with
each 60-byte ``session.update`` after it, and a language Whisper does not know failed every turn's
STT. A language is an ISO 639-1 code, a voice name at most 64 characters."""

from __future__ import annotations

import json

from tests.helpers import serve, server_errors
from tests.transports.websocket.ws_client import EventClient


def language(value: str) -> dict:
    return {"audio": {"input": {"transcription": {"model": "whisper-1", "language": value}}}}


async def test_a_language_or_voice_that_is_no_name_is_refused_and_a_code_is_kept(models, gateway_config):
    async with serve(gateway_config(), models) as (url, _app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            refused = [
                (language("x" * 100_000), "session.audio.input.transcription.language"),
                (language("english"), "session.audio.input.transcription.language"),
                ({"audio": {"output": {"voice": "v" * 100_000}}}, "session.audio.output.voice"),
            ]
            for session, param in refused:
                mark = len(client.events)
                await client.send("session.update", session=session)
                error = (await client.wait_for("error", after=mark, timeout=10))["error"]
                assert (error["code"], error["param"]) == ("invalid_value", param), error
                assert not client.of_type("session.updated", after=mark)
            mark = len(client.events)
            fr_and_marin = language("fr")
            fr_and_marin["audio"]["output"] = {"voice": "marin"}
            await client.send("session.update", session=fr_and_marin)
            await client.send("session.update", session={"instructions": "Bref."})
            updated = await client.wait_for("session.updated", after=mark, timeout=10, count=2)
            assert updated["session"]["audio"]["input"]["transcription"]["language"] == "fr"
            assert len(json.dumps(updated)) < 4096
            mark = len(client.events)
            await client.send("session.update", session=language(""))  # as null: unchanged
            updated = await client.wait_for("session.updated", after=mark, timeout=10)
            assert updated["session"]["audio"]["input"]["transcription"]["language"] == "fr"
            assert not server_errors(client.events)
