"""One Realtime protocol implementation, one door, every transport. The WebSocket session's
``EventAudioSession`` is the WebRTC call's ``RealtimeSession`` with only the audio I/O of the
events added; every transport is a ``Transport`` leg of a door session, which owns the watchdogs,
the rate limit, DTMF, the hang-up sequence and the end reasons."""

from __future__ import annotations

import inspect

from gateway.pool import watchdog
from gateway.pool.end_reason import EndReason
from gateway.realtime.audio_events import EventAudioSession
from gateway.realtime.session import RealtimeSession
from gateway.transports import live_session
from gateway.transports.sip import call as sip_call
from gateway.transports.sip.call import SipCall
from gateway.transports.transport import Transport
from gateway.transports.webrtc import call as webrtc_call
from gateway.transports.webrtc.call import WebRTCCall
from gateway.transports.websocket import session as websocket_session
from gateway.transports.websocket.session import WebSocketTransport


def test_the_websocket_session_is_the_realtime_session_with_audio_io_only():
    assert issubclass(EventAudioSession, RealtimeSession)
    own = {name for name, value in vars(EventAudioSession).items() if inspect.isfunction(value)}
    # Audio in (metered, decoded off the loop, commit and clear after the appends before them) and out
    # (played by the client: output_audio_buffer.clear, a WebRTC/SIP event, refused).
    assert own == {
        "__init__",
        "handle_client_message",
        "_on_input_audio_buffer_append",
        "_on_input_audio_buffer_commit",
        "_on_input_audio_buffer_clear",
        "_on_output_audio_buffer_clear",
        "send_output_audio",
    }


def test_every_transport_is_a_leg_of_the_one_door():
    members = [name for name in dir(Transport) if not name.startswith("_")]
    assert set(members) == {"audio_input", "send_event", "when_audio_sent", "stop_audio", "close"}
    for leg in (WebRTCCall, WebSocketTransport, SipCall):
        for name in members:
            assert hasattr(leg, name) or name in inspect.signature(leg.__init__).parameters or name == "audio_input", (
                leg.__name__,
                name,
            )
        for name in ("send_event", "when_audio_sent", "stop_audio", "close"):
            expected = list(inspect.signature(getattr(Transport, name)).parameters)
            assert list(inspect.signature(getattr(leg, name)).parameters) == expected, (leg.__name__, name)


def test_every_transport_uses_the_one_watchdog_and_end_reasons():
    assert live_session.watch_session is watchdog.watch_session
    for leg in (webrtc_call, websocket_session, sip_call):
        assert leg.EndReason is EndReason, leg.__name__
    assert EndReason.WEBSOCKET_CLOSED.client_left
