"""SIP in: a phone (a SIP trunk, a PBX, a softphone) calls the gateway directly, with OpenAI's SIP
call control (``realtime.call.incoming`` webhook; accept, reject, refer, hang up over HTTP; the
session on a sideband WebSocket).

Modules, bottom up: ``message`` (strict parser, serializer), ``transactions`` (RFC 3261 17),
``transport`` (UDP and TCP), ``dialog`` (the UAS dialog), ``sdp`` (plain RTP offer/answer), ``rtp``
(symmetric RTP, RFC 4733 key presses), ``webhook`` (Standard Webhooks signing), ``call`` (one
call: the door's ``Transport``), ``user_agent`` (the server and its control API; each call's
session opened through the door, ``gateway.transports.door``).
"""
