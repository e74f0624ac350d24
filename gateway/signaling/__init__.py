"""Signaling: the SDP offer/answer exchange (RFC 8866, JSEP RFC 8829) and the WebRTC helpers a
call leg (``gateway.transports.webrtc``) uses.

Modules: ``sdp_syntax`` (each line of an offer against its grammar, problems in SDP terms),
``offer`` (checks and normalisation of an SDP offer), ``answer`` (aiortc's answer shaped to the
offer: BUNDLE, transport protocol, DTLS role), ``dtmf`` (RFC 4733 ``telephone-event`` negotiated
and received), ``data_channel`` (text messages that are not UTF-8), ``media_watch`` (the caller's
audio clock and presence), ``ice`` (STUN/TURN configuration), ``end_reason`` (why a call ends;
defined in ``gateway.pool.end_reason``, shared by every transport).
"""
