"""The WebRTC transport: one RTCPeerConnection per caller, the leg of a door session, and the SDP
offer/answer exchange (RFC 8866, JSEP RFC 8829) it makes.

Modules: ``call`` (the leg: SDP answer, ``oai-events`` data channel, the media track in and out,
ICE/connect/media watchdogs), ``offer`` (checks and normalisation of an SDP offer, each line first
against its grammar: ``gateway.transports.sdp``, the SDP reader of every leg), ``answer``
(aiortc's answer shaped to the offer: BUNDLE, transport protocol, DTLS role), ``dtmf`` (RFC 4733
``telephone-event`` negotiated and received on aiortc), ``data_channel`` (text messages that are
not UTF-8), ``ice`` (STUN/TURN configuration). The codecs are the WebRTC rows of
``gateway.media.codecs``; the caller's media clock and presence are ``gateway.media.media_watch``;
why a call ends is ``gateway.pool.end_reason``.
"""
