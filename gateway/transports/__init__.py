"""Transports beside the WebRTC call (``gateway.signaling``) that carry the Realtime protocol: a
WebSocket session (``GET /v1/realtime``) claims a pool unit exactly as a call does and drives one
Realtime session, with the audio inside the events; a sideband WebSocket attaches to a live call.

Modules: ``event_socket`` (a WebSocket of JSON events), ``websocket_session`` (one session: audio in
and out, watchdogs, end), ``registry`` (the live sessions), ``sideband`` (``?call_id=`` control of a
WebRTC call).
"""
