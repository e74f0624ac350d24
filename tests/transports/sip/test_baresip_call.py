"""A real SIP phone (Debian's baresip) calls the gateway: the call is announced by a signed
``realtime.call.incoming`` webhook, accepted over HTTP, its question transcribed and answered by
voice (what the phone heard is transcribed again), its DTMF digits seen on the sideband; a reject
gives the phone 486; an accept after the caller hung up is 404, no decision in time 480; a REFER
reaches the phone."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import aiohttp
import numpy as np

from gateway.server.app_keys import SIP
from tests.helpers import app_idle, content_words, missed_words, says, serve, wait_until
from tests.transports.sip.baresip_phone import BaresipPhone
from tests.transports.sip.conftest import WEBHOOK_KEY, WEBHOOK_SECRET, sip_config
from tests.transports.sip.sip_socket import SipSocket

QUESTION = "What is the capital of France?"


def _check_signature(headers: dict[str, str], body: str) -> None:
    """Standard Webhooks, recomputed here: v1,base64(HMAC-SHA256(key, id.timestamp.body))."""
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.{body}".encode()
    expected = base64.b64encode(hmac.new(WEBHOOK_KEY, signed, hashlib.sha256).digest()).decode()
    assert headers["webhook-signature"] == f"v1,{expected}"


def _microphone(speech_8k, text: str, tail_s: float = 40.0) -> np.ndarray:
    silence = np.zeros(8000, np.int16)
    return np.concatenate([silence, speech_8k(text), np.zeros(int(8000 * tail_s), np.int16)])


async def test_baresip_call_is_announced_accepted_answered_and_reports_digits(
    models, speech_8k, gateway_config, webhook, tmp_path
):
    config = sip_config(
        gateway_config, sip_webhook_url=webhook.url, sip_webhook_secret=WEBHOOK_SECRET, max_response_tokens=24
    )
    async with serve(config, models) as (url, app), BaresipPhone(tmp_path, _microphone(speech_8k, QUESTION)) as phone:
        assert (await phone.command("dial", f"sip:agent@127.0.0.1:{config.sip_port}"))["ok"]
        headers, body = await webhook.next()
        _check_signature(headers, body)
        event = json.loads(body)
        assert event["type"] == "realtime.call.incoming" and event["object"] == "event"
        assert headers["webhook-id"] == event["id"] and event["id"].startswith("evt_")
        call_id = event["data"]["call_id"]
        names = {header["name"] for header in event["data"]["sip_headers"]}
        assert {"From", "To", "Call-ID"} <= names
        async with aiohttp.ClientSession() as http:
            session = {"type": "realtime", "instructions": "Answer in one short sentence."}
            async with http.post(f"{url}/v1/realtime/calls/{call_id}/accept", json=session) as accepted:
                assert accepted.status == 200, await accepted.text()
            async with http.post(f"{url}/v1/realtime/calls/{call_id}/accept", json=session) as again:
                assert again.status == 409  # answered once
        await phone.event("CALL_ESTABLISHED")
        said = await phone.converse(url, call_id, QUESTION, press="15#")
        call = app[SIP].calls[call_id]
        assert call.rtp.latched  # symmetric RTP: the phone's packets set where replies go
        await phone.command("hangup")
        assert await wait_until(lambda: call_id not in app[SIP].calls, 10)
        assert call.end_reason == "caller_bye"
        assert await wait_until(lambda: app_idle(app), 15)
    heard_reply = phone.heard(models.stt)
    # The reply heard back through the phone says what the model said: its content words, a third
    # of them allowed to go (G.711 both ways, and Whisper on a voice it did not hear whole).
    missed = missed_words(heard_reply, said)
    assert says(heard_reply, said, misses=len(content_words(said)) // 3), (heard_reply, said, missed)


async def test_reject_is_486_accept_after_the_caller_left_404_no_decision_480(
    models, speech_8k, gateway_config, webhook, tmp_path
):
    config = sip_config(
        gateway_config, sip_webhook_url=webhook.url, sip_webhook_secret=WEBHOOK_SECRET, sip_accept_timeout_s=2.0
    )
    async with serve(config, models) as (url, app), BaresipPhone(tmp_path, _microphone(speech_8k, "Hello.")) as phone:
        async with aiohttp.ClientSession() as http:
            await phone.command("dial", f"sip:agent@127.0.0.1:{config.sip_port}")
            call_id = json.loads((await webhook.next())[1])["data"]["call_id"]
            async with http.post(f"{url}/v1/realtime/calls/{call_id}/reject", json={"status_code": 486}) as rejected:
                assert rejected.status == 200
            closed = await phone.event("CALL_CLOSED")
            assert "486" in json.dumps(closed), closed
            assert await wait_until(lambda: app_idle(app), 15)

            phone.events.clear()
            await phone.command("dial", f"sip:agent@127.0.0.1:{config.sip_port}")
            call_id = json.loads((await webhook.next())[1])["data"]["call_id"]
            await phone.command("hangup")  # CANCEL before the answer: 487
            assert await wait_until(lambda: call_id not in app[SIP].calls, 10)
            async with http.post(f"{url}/v1/realtime/calls/{call_id}/accept", json={"type": "realtime"}) as late:
                assert late.status == 404
            assert await wait_until(lambda: app_idle(app), 15)

            phone.events.clear()  # the backend never decides: 480 after sip_accept_timeout_s
            await phone.command("dial", f"sip:agent@127.0.0.1:{config.sip_port}")
            call_id = json.loads((await webhook.next())[1])["data"]["call_id"]
            closed = await phone.event("CALL_CLOSED", within=15)
            assert "480" in json.dumps(closed), closed
            assert app[SIP].calls == {} and await wait_until(lambda: app_idle(app), 15)


async def test_refer_reaches_the_phone(models, speech_8k, gateway_config, tmp_path):
    config = sip_config(gateway_config)  # no webhook: accepted with the default session
    async with serve(config, models) as (url, app), BaresipPhone(tmp_path, _microphone(speech_8k, "Hello.")) as phone:
        await phone.command("dial", f"sip:agent@127.0.0.1:{config.sip_port}")
        await phone.event("CALL_ESTABLISHED")
        call_id = next(iter(app[SIP].calls))
        async with SipSocket(config.sip_port) as target, aiohttp.ClientSession() as http:
            uri = f"sip:transfer@127.0.0.1:{target.port}"
            async with http.post(f"{url}/v1/realtime/calls/{call_id}/refer", json={"target_uri": uri}) as referred:
                assert referred.status == 200, await referred.text()
            invite = await target.receive(within=10)  # the phone dials the transfer target
            assert getattr(invite, "method", "") == "INVITE" and "transfer@" in getattr(invite, "uri", "")
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{url}/v1/realtime/calls/{call_id}/hangup") as hung:
                assert hung.status == 200
        assert await wait_until(lambda: app_idle(app), 15)
