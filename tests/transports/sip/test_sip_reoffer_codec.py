"""A re-INVITE that changes the voice codec at the call's clock rate is followed (RFC 3264 8.3.2:
"as soon as it sends its answer, the answerer MUST begin sending media using any formats in the
offer that were also present in the answer ... and MUST NOT send using any formats that are not in
the offer"): a PCMU call re-offered PCMA alone is answered PCMA and sends PCMA, and hears it; the
answer's ``a=ptime:20`` stays what the gateway sends whatever the offer's ``a=ptime`` (RFC 8866
6.4: a recommendation), as at the INVITE. A change of clock rate (G.711 -> Opus) gets 488 and the
call goes on as it was. Before, every codec or payload type change got 488 (``a codec change
mid-call ... is not supported``), even PCMA for PCMU, and an offer listing PCMA before PCMU too."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.media.g711 import encode_alaw
from gateway.server.app_keys import SIP
from gateway.transports.sip.rtp import parse_rtp
from tests.helpers import app_idle, serve, wait_until
from tests.transports.sip import sip_samples
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.reinvite_peer import CallerRtp, MediaPort, answered_call, media_port, offered, origin
from tests.transports.sip.sip_socket import SipSocket

TONE_PCMA = encode_alaw((np.sin(np.arange(160) / 3) * 8000).astype(np.int16))  # 20 ms of PCMA
# baresip's offer with PCMA alone, asking for 30 ms packets
PCMA_ONLY = (
    sip_samples.BARESIP_SDP.replace("RTP/AVP 0 8 101", "RTP/AVP 8 101")
    .replace("a=rtpmap:0 PCMU/8000\r\n", "")
    .replace("a=ptime:20", "a=ptime:30")
)
OPUS_ONLY = sip_samples.BARESIP_OPUS_SDP.replace("RTP/AVP 96 0 8 101", "RTP/AVP 96 101")


def _sent(media: MediaPort, start: int) -> list[tuple[int, int]]:
    """(payload type, payload bytes) of each packet the caller received from index ``start`` on."""
    packets = [parse_rtp(datagram) for datagram in media.datagrams[start:]]
    return [(packet.payload_type, len(packet.payload)) for packet in packets if packet is not None]


@pytest.mark.slow
async def test_a_reinvite_offering_only_pcma_moves_a_pcmu_call_to_pcma(models, gateway_config):
    """PCMU call; the caller re-offers PCMA alone with ``a=ptime:30``: answered ``RTP/AVP 8 101``
    with ``a=ptime:20``, the next ``o=`` version; the gateway's packets are PCMA (payload type 8,
    160 bytes: 20 ms) from then on; the caller's PCMA is heard, and PCMU still in flight too.
    Failed before: 488. An Opus-only re-offer then gets 488 and the call goes on in PCMA."""
    config = sip_config(gateway_config, media_timeout_s=30.0)
    media_socket, media, rtp_port = await media_port()
    try:
        async with serve(config, models) as (_url, app), SipSocket(config.sip_port) as caller:
            port = config.sip_port
            ok, tag, gateway_port = await answered_call(caller, port, rtp_port)
            answer = ok.body.decode()
            assert f"m=audio {gateway_port} RTP/AVP 0 101" in answer, answer
            call = next(iter(app[SIP].calls.values()))
            heard: list[int] = []
            call.rtp.on_audio = lambda samples, arrival, inner=call.rtp.on_audio: (
                heard.append(samples.size),
                inner(samples, arrival),
            )
            rtp = CallerRtp(gateway_port)
            rtp.send(media_socket, 10)
            assert await wait_until(lambda: call.rtp.packets == 10 and len(media.datagrams) >= 5, 10)
            assert set(_sent(media, 0)) == {(0, 160)}

            pcma = await offered(caller, port, tag, PCMA_ONLY, rtp_port, 39458)
            assert pcma.status == 200, pcma.encode()
            body = pcma.body.decode()
            assert f"m=audio {gateway_port} RTP/AVP 8 101" in body and "a=rtpmap:8 PCMA/8000" in body, body
            assert "a=ptime:20" in body and origin(body) == (origin(answer)[0], origin(answer)[1] + 1)
            start = len(media.datagrams)
            assert await wait_until(lambda: len(media.datagrams) >= start + 10, 10)
            assert set(_sent(media, start)[2:]) == {(8, 160)}, _sent(media, start)  # 2: sent before the answer

            heard_before, dropped = len(heard), call.rtp.dropped
            rtp.send(media_socket, 2)  # PCMU still in flight
            rtp.send(media_socket, 10, payload_type=8, payload=TONE_PCMA)
            assert await wait_until(lambda: call.rtp.packets == 22 and len(heard) >= heard_before + 12, 10)
            assert call.rtp.dropped == dropped

            refused = await offered(caller, port, tag, OPUS_ONLY, rtp_port, 39459)
            assert refused.status == 488 and "8000 Hz" in (refused.get("Warning") or ""), refused.encode()
            start = len(media.datagrams)
            assert await wait_until(lambda: len(media.datagrams) >= start + 5, 10)
            assert set(_sent(media, start)) == {(8, 160)} and call.end_reason is None

            caller.send(sip_samples.in_dialog("BYE", port, tag, caller_port=caller.port, cseq=39460))
            assert await wait_until(lambda: not app[SIP].calls and app_idle(app), 15)
    finally:
        media_socket.close()
