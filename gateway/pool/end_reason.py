"""Why a call or a WebSocket session ends: the ``code`` of the Realtime ``error`` event sent before
the transport closes, the reason a pool unit drains with (``PipelineUnit.begin_drain``,
``close_reason``) and the ``reason`` label of the ``call_end`` metric. One set for every transport
(``gateway.transports``) and the pool, so it lives below them."""

from __future__ import annotations

import enum


class EndReason(enum.StrEnum):
    """One reason a call ends. A ``str`` (its value is the wire string), so it goes wherever a
    reason string went: ``begin_drain(reason)``, JSON, metric labels, log lines."""

    CLIENT_HANGUP = "client_hangup"  # DELETE /v1/realtime/calls/{id} or POST .../hangup
    PEER_CLOSED = "peer_closed"  # the RTCPeerConnection's connectionState became "closed"
    DATA_CHANNEL_CLOSED = "data_channel_closed"  # the caller closed "oai-events"
    WEBSOCKET_CLOSED = "websocket_closed"  # the client closed the WebSocket (or the connection dropped)
    ICE_FAILED = "ice_failed"  # connectionState "failed" (ICE or DTLS)
    CONNECT_TIMEOUT = "connect_timeout"  # ICE/DTLS did not connect within connect_timeout_s
    MEDIA_TIMEOUT = "media_timeout"  # nothing (RTP, RTCP, DTLS) from the caller for media_timeout_s
    IDLE_TIMEOUT = "idle_timeout"  # no speech and no response for idle_timeout_s
    MAX_DURATION = "max_duration"  # the call lasted max_call_s
    SERVER_SHUTDOWN = "server_shutdown"  # the gateway is stopping
    INVALID_OFFER = "invalid_offer"  # aiortc could not answer the offer (HTTP 400)
    SERVER_ERROR = "server_error"  # the call could not be built (HTTP 500)
    CLIENT_TOO_SLOW = "client_too_slow"  # the caller left too many server events unread (WebRTC: oai-events)
    # SIP calls (gateway.transports.sip)
    CALLER_BYE = "caller_bye"  # the caller sent BYE
    CALLER_CANCEL = "caller_cancel"  # the caller sent CANCEL before the call was answered (487)
    CALL_REJECTED = "call_rejected"  # POST /v1/realtime/calls/{id}/reject
    CALL_REFERRED = "call_referred"  # the caller was transferred (REFER, NOTIFY 200)
    ACCEPT_TIMEOUT = "accept_timeout"  # no accept in time, or the webhook failed: SIP 480 Temporarily Unavailable
    ACK_TIMEOUT = "ack_timeout"  # the caller never acknowledged the 200 OK (RFC 3261 13.3.1.4)

    @property
    def client_left(self) -> bool:
        """True when the caller itself ended the call (hung up, closed the peer connection, the
        data channel or the WebSocket): there is nobody to tell why, so no ``error`` event is sent."""
        return self in _CLIENT_LEFT


_CLIENT_LEFT = frozenset(
    {
        EndReason.CLIENT_HANGUP,
        EndReason.PEER_CLOSED,
        EndReason.DATA_CHANNEL_CLOSED,
        EndReason.WEBSOCKET_CLOSED,
        EndReason.CALLER_BYE,
        EndReason.CALLER_CANCEL,
    }
)
