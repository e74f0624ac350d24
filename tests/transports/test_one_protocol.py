"""One Realtime protocol implementation, two transports. The WebSocket session's
``EventAudioSession`` is the WebRTC call's ``RealtimeSession`` with only the audio I/O of the
events added; both transports share the watchdogs and the end reasons."""

from __future__ import annotations

import inspect

from gateway.pool import watchdog
from gateway.pool.end_reason import EndReason
from gateway.realtime.audio_events import EventAudioSession
from gateway.realtime.session import RealtimeSession
from gateway.signaling import call
from gateway.signaling.end_reason import EndReason as SignalingEndReason
from gateway.transports import websocket_session


def test_the_websocket_session_is_the_realtime_session_with_audio_io_only():
    assert issubclass(EventAudioSession, RealtimeSession)
    own = {name for name, value in vars(EventAudioSession).items() if inspect.isfunction(value)}
    assert own == {"__init__", "_on_input_audio_buffer_append", "send_output_audio"}


def test_both_transports_use_the_one_watchdog_and_end_reasons():
    assert watchdog.watch_session is call.watch_session is websocket_session.watch_session
    assert SignalingEndReason is EndReason
    assert EndReason.WEBSOCKET_CLOSED.client_left
