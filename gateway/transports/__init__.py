"""Transports: how a caller reaches a Realtime session, and the one door they all open it through.

``transport`` (a transport's :class:`TransportKind` and the ``Transport`` protocol its leg
implements), ``door`` (``Door.open`` and the live sessions of every transport by id),
``live_session`` (one session: the one hang-up sequence, the client-event rate, DTMF, watchdogs,
recording), ``sdp`` (the SDP reader of every leg), ``webrtc`` (the WebRTC call: one
RTCPeerConnection with the ``oai-events`` data channel, its SDP offer/answer, ICE and DTMF),
``websocket`` (the Realtime WebSocket transport with the audio inside the events, and the sideband
that steers a live call), ``sip`` (a SIP leg: plain RTP telephony), ``call_record`` (a recorded
call's files).
"""
