"""A stream the gateway rejected stays rejected (RFC 3264 6: no media flows for it; 8.1: a re-offer
adds a stream below the previous offer's m-lines or in a slot that offer disabled with port 0).
Before, once a re-INVITE removed the call's audio (port 0), the call moved to the first usable
audio m-line of that offer, even one the gateway had answered with port 0 and the offerer repeated
unchanged: the gateway started sending RTP to, and hearing, a stream both sides had rejected."""

from __future__ import annotations

import asyncio

import pytest

from gateway.server.app_keys import SIP
from gateway.transports.sip.sdp import SdpError, added_stream, media_lines
from tests.helpers import app_idle, serve, wait_until
from tests.transports.sip import sip_samples
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.reinvite_peer import CallerRtp, answered_call, media_port, offered
from tests.transports.sip.sip_socket import SipSocket

# Two PCMU streams: the gateway takes the first and rejects the second
TWO_AUDIO = (
    "v=0\r\n"
    "o=- 1 1 IN IP4 127.0.0.1\r\n"
    "s=-\r\n"
    "c=IN IP4 {rtp_host}\r\n"
    "t=0 0\r\n"
    "m=audio {rtp_port} RTP/AVP 0 101\r\n"
    "a=rtpmap:101 telephone-event/8000\r\n"
    "a=sendrecv\r\n"
    "m=audio SECOND RTP/AVP 0 101\r\n"
    "a=rtpmap:101 telephone-event/8000\r\n"
    "a=sendrecv\r\n"
)


def m_lines(sdp: str) -> list[str]:
    return [line[2:] for line in sdp.splitlines() if line.startswith("m=")]


def _offer(first: str, second: str) -> str:
    """TWO_AUDIO with the first m-line's port ``first`` (a template field or "0") and the second's."""
    return TWO_AUDIO.replace("m=audio {rtp_port}", f"m=audio {first}").replace("SECOND", second)


def test_only_a_stream_the_reoffer_adds_is_one_to_move_to():
    """:func:`added_stream`: the second stream repeated as before is no new one (SdpError), one in a
    slot the previous offer disabled is, and so is one added below the previous offer's m-lines."""
    before = _offer("4000", "4002").format(rtp_host="192.0.2.1")
    removed = _offer("0", "4002").format(rtp_host="192.0.2.1")
    with pytest.raises(SdpError, match="no audio stream added"):
        added_stream(removed, media_lines(before), "optional")
    disabled = _offer("0", "0").format(rtp_host="192.0.2.1")
    assert added_stream(removed, media_lines(disabled), "optional").slot == 1
    one_line = before.split("m=audio 4002")[0]
    assert added_stream(removed, media_lines(one_line), "optional").slot == 1


@pytest.mark.slow
async def test_a_stream_rejected_before_is_not_followed_when_the_call_s_audio_is_removed(models, gateway_config):
    """A caller offers two audio streams; the gateway answers the first and rejects the second
    (port 0). A re-INVITE removes the first (port 0) and repeats the second as it was: both are
    answered with port 0, the second's RTP is not heard and nothing is sent to it. Failed before:
    the second m-line was answered with the gateway's port, its RTP heard and replies sent there.
    When the offerer disables the second stream and then offers it again (a stream re-added in
    its slot, RFC 3264 8.1), the call follows it."""
    config = sip_config(gateway_config, media_timeout_s=30.0)
    first_socket, _first, first_port = await media_port()
    second_socket, second, second_port = await media_port()
    try:
        async with serve(config, models) as (_url, app), SipSocket(config.sip_port) as caller:
            port = config.sip_port
            ok, tag, gateway_port = await answered_call(
                caller, port, first_port, _offer("{rtp_port}", str(second_port))
            )
            answer = ok.body.decode()
            assert m_lines(answer) == [f"audio {gateway_port} RTP/AVP 0 101", "audio 0 RTP/AVP 0"], answer
            call = next(iter(app[SIP].calls.values()))
            rtp = CallerRtp(gateway_port)
            rtp.send(first_socket, 10, ssrc=11)
            assert await wait_until(lambda: call.rtp.packets == 10 and call.rtp.latched, 10)

            removed = (await offered(caller, port, tag, _offer("0", str(second_port)), first_port, 39458)).body.decode()
            assert m_lines(removed) == ["audio 0 RTP/AVP 0", "audio 0 RTP/AVP 0"], removed
            assert call.offer.slot == 0 and call.rtp.removed
            rtp.send(second_socket, 10, ssrc=22)
            await asyncio.sleep(0.5)
            assert call.rtp.packets == 10 and second.datagrams == [], (call.rtp.packets, len(second.datagrams))

            disabled = (await offered(caller, port, tag, _offer("0", "0"), first_port, 39459)).body.decode()
            assert m_lines(disabled) == ["audio 0 RTP/AVP 0", "audio 0 RTP/AVP 0"], disabled
            back = (await offered(caller, port, tag, _offer("0", str(second_port)), first_port, 39460)).body.decode()
            assert m_lines(back) == ["audio 0 RTP/AVP 0", f"audio {gateway_port} RTP/AVP 0 101"], back
            assert call.offer.slot == 1 and call.rtp.remote == ("127.0.0.1", second_port)
            rtp.send(second_socket, 10, ssrc=22)
            assert await wait_until(lambda: call.rtp.packets == 20, 10), call.rtp.packets
            assert await wait_until(lambda: len(second.datagrams) >= 5, 10)

            caller.send(sip_samples.in_dialog("BYE", port, tag, caller_port=caller.port, cseq=39461))
            assert await wait_until(lambda: not app[SIP].calls and app_idle(app), 15)
    finally:
        first_socket.close()
        second_socket.close()
