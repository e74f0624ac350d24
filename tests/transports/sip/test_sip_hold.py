"""Hold and stream removal of a SIP call against a real gateway (real pool and models), from raw
sockets on loopback: a reply being spoken when the hold comes stops where it is and goes on from
there at the resume, and a response made while held waits for it; an offer with port 0 removes
the stream (RFC 3264 8.2): answered with port 0, no media, and the call ends at the media timeout
unless a re-INVITE brings a stream back."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
from collections.abc import Iterator

import numpy as np
import pytest

from gateway.media.g711 import decode_mulaw, encode_mulaw
from gateway.pool.end_reason import EndReason
from gateway.server.app_keys import POOL, SIP
from gateway.transports.sip.message import SipRequest, make_response
from gateway.transports.sip.rtp import RtpPacket, build_rtp, parse_rtp
from tests.helpers import app_idle, says, serve, wait_until
from tests.transports.sip import sip_samples
from tests.transports.sip.baresip_phone import transcribed
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.reinvite_peer import MediaPort, answered_call, media_port, offered, origin
from tests.transports.sip.sip_socket import SipSocket
from tests.transports.websocket.ws_client import EventClient

SILENCE = encode_mulaw(np.zeros(160, np.int16))
SILENT_CODES = {0xFF, 0x7F}  # PCMU's two codes of 0


class _Phone:
    """The caller's microphone: 20 ms of silence every 20 ms, as a phone sends (a sendonly hold's
    music, too: only its packets matter here), from ``socket`` with ``ssrc`` (both may change)."""

    def __init__(self, socket: asyncio.DatagramTransport, gateway_port: int, ssrc: int = 7) -> None:
        self.socket, self.gateway_port, self.ssrc = socket, gateway_port, ssrc
        self._sequence = 0
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            self._sequence += 1
            packet = RtpPacket(0, False, self._sequence & 0xFFFF, 160 * self._sequence, self.ssrc, SILENCE)
            self.socket.sendto(build_rtp(packet), ("127.0.0.1", self.gateway_port))
            await asyncio.sleep(0.02)

    def stop(self) -> None:
        self._task.cancel()


def _payloads(media: MediaPort, start: int = 0) -> Iterator[bytes]:
    for datagram in media.datagrams[start:]:
        packet = parse_rtp(datagram)
        if packet is not None:
            yield packet.payload


def _voiced(media: MediaPort, start: int = 0) -> int:
    """Packets the caller received from index ``start`` on that carry sound (not PCMU's zeros)."""
    return sum(1 for payload in _payloads(media, start) if set(payload) - SILENT_CODES)


def _heard(media: MediaPort, start: int = 0) -> np.ndarray:
    """What the caller heard from index ``start`` on, packets one after the other: int16 at 8 kHz."""
    return np.concatenate([decode_mulaw(payload) for payload in _payloads(media, start)] or [np.zeros(0, np.int16)])


@pytest.mark.slow
async def test_a_reply_waits_out_a_hold_and_goes_on_from_where_it_stopped(models, gateway_config):
    """A PBX holds the call while the assistant speaks. Before, the reply went on into the hold:
    paced out, dropped, and recorded as heard, its end reported while the caller was away; a
    response made during the hold played into it as well. Now the playout is suspended: nothing
    of the reply is taken while held (the buffered audio does not go down, no
    ``output_audio_buffer.stopped``), and at the resume it goes on from where it stopped, so the
    caller hears all of it (the heard audio, transcribed, says what the reply says); a response
    made while held does not start (no ``output_audio_buffer.started``) until the resume (it
    stays in progress: its speech waits for room in the playout buffer)."""
    config = sip_config(gateway_config, media_timeout_s=30.0, max_response_tokens=60)
    media_socket, media, rtp_port = await media_port()
    phone = None
    try:
        async with serve(config, models) as (url, app), SipSocket(config.sip_port) as caller:
            port = config.sip_port
            _ok, tag, gateway_port = await answered_call(caller, port, rtp_port)
            phone = _Phone(media_socket, gateway_port)
            call = next(iter(app[SIP].calls.values()))
            playout = app[POOL].units[0].playout
            assert await wait_until(lambda: call.rtp.latched and len(media.datagrams) >= 5, 10)
            async with EventClient(url, query=f"?call_id={call.id}") as control:
                mark = await control.ask("Name the seven days of the week, one by one.")
                first = await control.wait_for("output_audio_buffer.started", timeout=90, after=mark)
                reply_from = max(0, len(media.datagrams) - 25)
                assert await wait_until(lambda: _voiced(media, reply_from) >= 40, 30)  # 0.8 s of it heard

                music_hold = sip_samples.BARESIP_SDP.replace("a=sendrecv", "a=sendonly")
                assert "a=recvonly" in (await offered(caller, port, tag, music_hold, rtp_port, 39458)).body.decode()
                await asyncio.sleep(0.1)  # what was sent before the hold has come
                held_at, left = len(media.datagrams), [playout.buffered_ms]
                for _ in range(30):  # 3 s on hold
                    await asyncio.sleep(0.1)
                    left.append(playout.buffered_ms)
                assert len(media.datagrams) == held_at  # nothing sent, as before
                assert all(later >= earlier for earlier, later in itertools.pairwise(left)), left  # nothing taken
                assert left[-1] > 0 and not control.of_type("output_audio_buffer.stopped", mark)

                assert (
                    "a=sendrecv"
                    in (await offered(caller, port, tag, sip_samples.BARESIP_SDP, rtp_port, 39459)).body.decode()
                )
                await control.wait_for("output_audio_buffer.stopped", timeout=90, after=mark)
                done = control.of_type("response.done", mark)
                assert done and done[-1]["response"]["status"] == "completed", done
                said = control.of_type("response.output_audio_transcript.done", mark)[-1]["transcript"]
                await asyncio.sleep(0.3)
                heard = transcribed(models.stt, _heard(media, reply_from), 8000)
                assert says(heard, said, misses=2), (heard, said)

                # A response made while held waits for the resume
                inactive = sip_samples.BARESIP_SDP.replace("a=sendrecv", "a=inactive")
                assert "a=inactive" in (await offered(caller, port, tag, inactive, rtp_port, 39460)).body.decode()
                second = await control.ask("Name the four seasons of the year.")
                await control.wait_for("response.output_audio_transcript.delta", timeout=90, after=second)  # queued
                await asyncio.sleep(1.0)
                assert not control.of_type("output_audio_buffer.started", second) and playout.buffered_ms > 0
                resumed_at = len(media.datagrams)
                assert (await offered(caller, port, tag, sip_samples.BARESIP_SDP, rtp_port, 39461)).body
                await control.wait_for("output_audio_buffer.started", timeout=30, after=second)
                await control.wait_for("output_audio_buffer.stopped", timeout=90, after=second)
                assert control.of_type("response.done", second)[-1]["response"]["status"] == "completed"
                assert _voiced(media, resumed_at) >= 25, _voiced(media, resumed_at)  # heard after the resume
                assert first["response_id"] != control.of_type("output_audio_buffer.started", second)[0]["response_id"]

            caller.send(sip_samples.in_dialog("BYE", port, tag, caller_port=caller.port, cseq=39462))
            assert await wait_until(lambda: not app[SIP].calls and app_idle(app), 15)
    finally:
        if phone is not None:
            phone.stop()
        media_socket.close()


@pytest.mark.slow
async def test_a_port_0_offer_removes_the_stream_and_the_call_ends_unless_one_comes_back(models, gateway_config):
    """RFC 3264 8.2: an offer whose audio stream has port 0 removes it. Before, it was taken as a
    hold: answered with the gateway's own port, and the call was kept (the media timeout waited)
    for as long as the dialog lasted. Now the answer has port 0, nothing is sent, what still
    comes counts for nothing, and the media timeout runs: the call ends with a BYE unless a
    re-INVITE brings a stream back (then it is latched anew, a new SSRC included, and heard and
    sent to as before). An INVITE whose only audio stream has port 0 gets 488."""
    config = sip_config(gateway_config, media_timeout_s=3.0)
    media_socket, media, rtp_port = await media_port()
    removal = (
        "v=0\r\no=- 3596944745 589469586 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 {rtp_host}\r\nt=0 0\r\n"
        "m=audio 0 RTP/AVP 0\r\n"
    )
    phone = None
    try:
        async with serve(config, models) as (_url, app), SipSocket(config.sip_port) as caller:
            port = config.sip_port
            async with SipSocket(config.sip_port) as disabled:
                offer = sip_samples.BARESIP_SDP.replace("m=audio {rtp_port}", "m=audio 0")
                disabled.send(sip_samples.invite(port, caller_port=disabled.port, call_id="disabled-1", sdp=offer))
                refused = await disabled.response(488, within=15)
                assert "port 0" in (refused.get("Warning") or ""), refused.encode()

            ok, tag, gateway_port = await answered_call(caller, port, rtp_port)
            answer = ok.body.decode()
            phone = _Phone(media_socket, gateway_port)
            call = next(iter(app[SIP].calls.values()))
            assert await wait_until(lambda: call.rtp.latched and len(media.datagrams) >= 5, 10)

            removed = (await offered(caller, port, tag, removal, rtp_port, 39458)).body.decode()
            assert re.findall(r"m=audio (\d+) (\S+) (.*)\r\n", removed) == [("0", "RTP/AVP", "0")], removed
            assert origin(removed) == (origin(answer)[0], origin(answer)[1] + 1)
            await asyncio.sleep(0.1)
            sent, received = len(media.datagrams), call.rtp.packets
            await asyncio.sleep(0.6)  # the phone sends on: taken for nothing
            assert len(media.datagrams) == sent and call.rtp.packets == received and call.end_reason is None

            # The stream comes back (the same port, a new stream: a new SSRC)
            phone.ssrc = 8
            back = (await offered(caller, port, tag, sip_samples.BARESIP_SDP, rtp_port, 39459)).body.decode()
            assert f"m=audio {gateway_port} RTP/AVP 0 101" in back and "a=sendrecv" in back
            assert origin(back)[1] == origin(answer)[1] + 2
            assert await wait_until(lambda: call.rtp.packets > received + 10 and len(media.datagrams) > sent + 10, 10)
            await asyncio.sleep(3.5)  # longer than the media timeout: the call lives while media flows
            assert call.end_reason is None

            # Removed again: the media timeout ends the call with a BYE
            assert "m=audio 0 " in (await offered(caller, port, tag, removal, rtp_port, 39460)).body.decode()
            bye = None
            with contextlib.suppress(TimeoutError):
                while bye is None:
                    message = await caller.receive(within=10)
                    if isinstance(message, SipRequest) and message.method == "BYE":
                        bye = message
            assert bye is not None and call.end_reason is EndReason.MEDIA_TIMEOUT, call.end_reason
            answered_bye = make_response(bye, 200)
            caller.send(answered_bye.encode())
            assert await wait_until(lambda: not app[SIP].calls and app_idle(app), 15)
    finally:
        if phone is not None:
            phone.stop()
        media_socket.close()
