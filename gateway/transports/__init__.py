"""Transports: how a caller reaches a Realtime session, and the one door they all open it through.

``door`` (the live sessions of every transport by id, ``Door.open``, the one hang-up sequence, the
client-event rate, DTMF, the ``Transport`` protocol a leg implements), ``webrtc`` (the WebRTC call:
one RTCPeerConnection with the ``oai-events`` data channel), ``websocket`` (the Realtime WebSocket
transport with the audio inside the events, and the sideband that steers a live call). A SIP leg
goes in ``sip``. The SDP/ICE/RTP helpers a leg uses are ``gateway.signaling``.
"""
