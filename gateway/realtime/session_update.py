"""A Realtime session config, parsed once where it comes in: :class:`SessionUpdate`.

A session config object (the ``session`` of ``session.update``; the same object sent with an SDP
offer, minted into an ephemeral key by ``POST /v1/realtime/client_secrets``, or made of a WebSocket
URL's ``?model=``) is validated by :func:`~gateway.realtime.session_config.parse_update` against
the session limits in force (the configured ones: ``SessionLimits.from_config``) into a frozen
:class:`SessionUpdate`. The edge parses it (so an operator's limit is the edge's limit), the
offer, the grant, ``open()`` and the session carry it, and the session applies it without parsing
again. Every problem is a :class:`~gateway.realtime.items.ClientError`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from gateway.realtime.items import ClientError
from gateway.realtime.limits import SessionLimits
from gateway.realtime.session_config import detect_dialect, parse_update

JsonObject = Mapping[str, Any]

# Fields of a realtime session object that a transcription session has not: they shape responses,
# which a transcription session never makes. OpenAI's GA transcription session object
# (RealtimeTranscriptionSessionCreateRequest) is only ``type``, ``audio`` (``input``) and
# ``include``; what else a client sends is answered ``unknown_parameter``, "Unknown parameter:
# 'session.instructions'." Paths as sent, GA and beta (flat) shapes.
REALTIME_ONLY_FIELDS = (
    ("instructions",),
    ("tools",),
    ("tool_choice",),
    ("output_modalities",),
    ("max_output_tokens",),
    ("audio", "output"),
    ("voice",),
    ("speed",),
    ("output_audio_format",),
    ("max_response_output_tokens",),
    ("temperature",),
)


@dataclass(frozen=True)
class SessionUpdate:
    """A valid session config object and what it changes.

    ``session``: the object as sent (a ``{"session": {...}}`` wrapper removed), what client_secrets
    echoes and :meth:`merged` merges; ``changes``: the normalised changes of ``parse_update``
    (instructions, modalities, voice, max_tokens, turn_detection, tools...); ``dialect``: ``"ga"``,
    ``"beta"``, or None when the object has only keys both shapes share (the session keeps its own
    then); ``limits``: the limits it was checked against. Treat both mappings as read-only.
    """

    session: JsonObject
    changes: JsonObject
    dialect: Optional[str]
    limits: SessionLimits

    @classmethod
    def parse(cls, session: Any, limits: SessionLimits, *, beta_default: bool = False) -> SessionUpdate:
        """Validate ``session`` (any decoded JSON value) against ``limits``; ``beta_default`` is
        the dialect of an object with only shared keys. Raises ClientError (``param`` the dotted
        path of the bad field, e.g. ``session.instructions``)."""
        changes, _ = parse_update(session, beta_default=beta_default, limits=limits)
        dialect = detect_dialect(session)
        return cls(session=dict(session), changes=changes, dialect=dialect, limits=limits)

    @classmethod
    def from_request(cls, session: Any, limits: SessionLimits) -> Optional[SessionUpdate]:
        """The update of a session config sent over HTTP (with an offer, a client_secrets request):
        None stays None; a ``{"session": {...}}`` wrapper, which some clients send, is unwrapped.
        Raises ClientError."""
        if session is None:
            return None
        if isinstance(session, dict) and isinstance(session.get("session"), dict):
            session = session["session"]
        return cls.parse(session, limits)

    def as_transcription(self) -> SessionUpdate:
        """This update, making the session a transcription session (``session_type``) and naming no
        dialect: a ``transcription_session.update``'s flat object is that event's shape, not a sign
        that the client reads beta event names."""
        return dataclasses.replace(self, changes={**self.changes, "session_type": "transcription"}, dialect=None)

    def check_transcription(self) -> None:
        """For a transcription session (one that is or becomes one): ClientError
        (``unknown_parameter``, ``param`` the field's dotted path) when the object sets a field of
        :data:`REALTIME_ONLY_FIELDS`, as OpenAI answers it; they were accepted and did nothing."""
        for path in REALTIME_ONLY_FIELDS:
            node: Any = self.session
            for key in path:
                node = node.get(key) if isinstance(node, Mapping) else None
            if node is not None:
                param = ".".join(("session", *path))
                raise ClientError(
                    f"Unknown parameter: '{param}'. A transcription session makes no responses "
                    "(session.type 'transcription').",
                    "unknown_parameter",
                    param,
                )

    def beta(self, current: bool) -> bool:
        """The dialect a session speaks once this is applied (``current`` when the object has none)."""
        return current if self.dialect is None else self.dialect == "beta"

    def merged(self, override: Optional[SessionUpdate]) -> SessionUpdate:
        """``override`` on top of this one (nested objects merged key by key), checked again as a
        whole: each may be valid alone and not together. Raises ClientError."""
        if override is None:
            return self
        return SessionUpdate.parse(merged_objects(self.session, override.session), self.limits)


def merged_objects(base: JsonObject, override: JsonObject) -> dict[str, Any]:
    """``override`` on top of ``base``, nested objects merged key by key."""
    merged = dict(base)
    for key, value in override.items():
        below = merged.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            merged[key] = merged_objects(below, value)
        else:
            merged[key] = value
    return merged


def merged_updates(base: Optional[SessionUpdate], override: Optional[SessionUpdate]) -> Optional[SessionUpdate]:
    """``override`` on top of ``base`` (either may be None). Raises ClientError."""
    if base is None:
        return override
    return base.merged(override)


__all__ = ["ClientError", "SessionUpdate", "merged_objects", "merged_updates"]
