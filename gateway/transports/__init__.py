"""Transports: how a caller reaches a Realtime session, and the one door they all open it through.

``door`` (the live sessions of every transport by id, ``Door.open``, the one hang-up sequence, the
client-event rate, DTMF, the ``Transport`` protocol a leg implements), ``webrtc`` (the WebRTC call:
one RTCPeerConnection with the ``oai-events`` data channel, its SDP offer/answer, ICE and DTMF),
``websocket`` (the Realtime WebSocket transport with the audio inside the events, and the sideband
that steers a live call), ``sip`` (a SIP leg: plain RTP telephony).
"""
