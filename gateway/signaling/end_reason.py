"""Why a call ends: :class:`EndReason`, defined in ``gateway.pool.end_reason`` (one set for the
WebRTC calls here and the WebSocket sessions of ``gateway.transports``) and re-exported here."""

from gateway.pool.end_reason import EndReason

__all__ = ["EndReason"]
