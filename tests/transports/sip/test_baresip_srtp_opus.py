"""Real phones (Debian's baresip) that ask for more than plain G.711: one that requires SDES-SRTP
(``mediaenc=srtp-mand``: RTP/SAVP with ``a=crypto``, RFC 4568) over TLS, one that offers Opus
only (a wideband microphone). Each is answered, its question is heard (transcribed by the
gateway), the reply it heard back through its own decoder is transcribed again, and its key
presses arrive (RFC 4733, inside SRTP; beside Opus at 8 kHz); the SRTP call's keys appear in no
log line; a plain RTP offer over TLS is refused (488) unless ``sip_srtp`` allows it."""

from __future__ import annotations

import json
import logging
import re

import numpy as np
import pytest
from aiohttp import web

from gateway.server.app_keys import SIP
from gateway.server.runner import free_port
from tests.helpers import app_idle, content_words, says, serve, wait_until
from tests.transports.sip.baresip_phone import BaresipPhone
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.test_sip_tls import self_signed

QUESTION = "What is the capital of France?"


def _microphone(speech_8k, text: str, tail_s: float = 40.0) -> np.ndarray:
    silence = np.zeros(8000, np.int16)
    return np.concatenate([silence, speech_8k(text), np.zeros(int(8000 * tail_s), np.int16)])


async def _ask(url: str, app: web.Application, phone: BaresipPhone, press: str) -> str:
    """The phone's call answered (auto-accept), its QUESTION heard and answered, the keys
    ``press`` seen, the call hung up by the phone: what the model said."""
    await phone.event("CALL_ESTABLISHED")
    call_id = next(iter(app[SIP].calls))
    said = await phone.converse(url, call_id, QUESTION, press=press)
    await phone.command("hangup")
    assert await wait_until(lambda: call_id not in app[SIP].calls, 10)
    assert await wait_until(lambda: app_idle(app), 15)
    return said


def _heard_the_reply(phone: BaresipPhone, models, said: str) -> None:
    heard = phone.heard(models.stt)  # a third of the content words may go (Whisper on a phone call)
    assert says(heard, said, misses=len(content_words(said)) // 3), (heard, said)


@pytest.mark.slow
async def test_baresip_requiring_srtp_over_tls_is_answered_and_hears_the_reply(
    models, speech_8k, gateway_config, tmp_path, caplog
):
    caplog.set_level(logging.DEBUG)  # every logger, every message: no key may show
    cert_file, key_file = self_signed(tmp_path / "tls")
    tls_port = free_port()
    config = sip_config(
        gateway_config,
        sip_tls_cert=str(cert_file),
        sip_tls_key=str(key_file),
        sip_tls_port=tls_port,
        max_response_tokens=24,
    )
    async with (
        serve(config, models) as (url, app),
        BaresipPhone(
            tmp_path / "phone",
            _microphone(speech_8k, QUESTION),
            transport="tls",
            cafile=cert_file,
            mediaenc="srtp-mand",
        ) as phone,
    ):
        assert (await phone.command("dial", f"sip:agent@127.0.0.1:{tls_port};transport=tls"))["ok"]
        established = await phone.event("CALL_ESTABLISHED")
        call = next(iter(app[SIP].calls.values()))
        offer = call.invite.body.decode()
        assert "m=audio" in offer and " RTP/SAVP " in offer  # what the phone asked for
        assert re.search(r"m=audio \d+ RTP/SAVP 0 101", call.answer_sdp), call.answer_sdp
        assert call.rtp.srtp is not None
        said = await _ask(url, app, phone, press="5")
        assert call.rtp.latched and call.rtp.srtp.rejected == 0 and call.rtp.srtp.replayed == 0
        assert call.rtp.packets > 100  # the question came in SRTP, authenticated
    _heard_the_reply(phone, models, said)
    assert "srtp" in phone.log().lower() and "CALL_ESTABLISHED" in json.dumps(established)
    keys = re.findall(r"inline:([A-Za-z0-9+/=]+)", offer + call.answer_sdp)
    assert len(keys) == 2 and keys[0] != keys[1]  # the phone's key and the gateway's own
    logged = "\n".join(record.getMessage() + (record.exc_text or "") for record in caplog.records)
    assert logged and not [key for key in keys if key in logged or key[:16] in logged]


@pytest.mark.slow
async def test_baresip_offering_opus_only_gets_opus_and_hears_the_reply(models, speech, gateway_config, tmp_path):
    config = sip_config(gateway_config, max_response_tokens=24)
    silence = np.zeros(48000, np.int16)
    microphone = np.concatenate([silence, speech(QUESTION), np.zeros(48000 * 40, np.int16)])  # wideband: 48 kHz
    async with (
        serve(config, models) as (url, app),
        BaresipPhone(tmp_path, microphone, codecs=("opus",), rate=48000) as phone,
    ):
        assert (await phone.command("dial", f"sip:agent@127.0.0.1:{config.sip_port}"))["ok"]
        await phone.event("CALL_ESTABLISHED")
        call = next(iter(app[SIP].calls.values()))
        assert call.offer.codec == "opus" and call.rtp.clock_rate == 48000
        assert re.search(r"a=rtpmap:(\d+) opus/48000/2", call.answer_sdp), call.answer_sdp
        assert re.search(r"a=rtpmap:\d+ telephone-event/8000", call.answer_sdp)  # what baresip offers beside Opus
        said = await _ask(url, app, phone, press="15#")
        assert call.rtp.packets > 100 and call.rtp.sent > 100
    _, rate = phone.recording()
    assert rate == 48000  # the phone decoded Opus
    _heard_the_reply(phone, models, said)


async def test_plain_rtp_over_tls_is_refused_unless_sip_srtp_allows_it(models, speech_8k, gateway_config, tmp_path):
    """``sip_srtp`` ``auto`` (the default) requires SRTP of a call over TLS: a phone offering plain
    RTP/AVP there gets 488 and claims no unit; with ``optional`` the same phone is answered."""
    cert_file, key_file = self_signed(tmp_path / "tls")
    tls = {"sip_tls_cert": str(cert_file), "sip_tls_key": str(key_file)}
    for setting, answered in (("auto", False), ("optional", True)):
        tls_port = free_port()
        config = sip_config(gateway_config, sip_tls_port=tls_port, sip_srtp=setting, **tls)
        async with (
            serve(config, models) as (_url, app),
            BaresipPhone(
                tmp_path / setting, _microphone(speech_8k, "Hello.", tail_s=5), transport="tls", cafile=cert_file
            ) as phone,
        ):
            assert (await phone.command("dial", f"sip:agent@127.0.0.1:{tls_port};transport=tls"))["ok"]
            if answered:
                await phone.event("CALL_ESTABLISHED")
                call = next(iter(app[SIP].calls.values()))
                assert "RTP/AVP" in call.answer_sdp and "a=crypto" not in call.answer_sdp
                assert call.rtp.srtp is None
                await phone.command("hangup")
            else:
                closed = await phone.event("CALL_CLOSED")
                assert "488" in json.dumps(closed), closed
                assert not app[SIP].calls and app_idle(app)
            assert await wait_until(lambda: not app[SIP].calls and app_idle(app), 15)
