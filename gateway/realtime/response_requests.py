"""A client's ``response.create`` and ``response.cancel``, and the stop a ``conversation.item.truncate``
makes: checked against the responses going on and carried out on the session's
:class:`~gateway.realtime.response_tracker.ResponseTracker`.

Reference: the OpenAI Realtime API client events ``response.create`` (one response at a time:
``conversation_already_has_active_response`` while one is in progress) and ``response.cancel``
(``response_id`` optional; ``response_cancel_not_active`` when nothing it names is going on). Problems
raise :class:`ClientError`; the session turns it into an ``error`` event echoing the client's id.
``conversation.item.truncate`` says the client heard the item's audio only up to ``audio_end_ms``
("to ensure there is not text in the context that hasn't been heard by the user"); OpenAI makes a
reply faster than real time, so the truncate usually finds it done. The gateway paces a reply in
real time, so the same truncate finds it going on: :func:`stop_reply_of_item` ends it there, and
the ``response.cancel`` the OpenAI Agents SDK (Python) sends after its truncate is answered with
nothing, as OpenAI answers the cancel of a reply still going on, not ``response_cancel_not_active``.
"""

from __future__ import annotations

from typing import Any

from gateway.realtime.control import PipelineControl
from gateway.realtime.conversation import Conversation
from gateway.realtime.items import ClientError
from gateway.realtime.response_params import parse_response_params
from gateway.realtime.response_tracker import ResponseTracker
from gateway.realtime.session_settings import SessionSettings


def create_response(
    responses: ResponseTracker, params: Any, settings: SessionSettings, conversation: Conversation
) -> None:
    """Start the response ``params`` (the event's ``response`` object, None for the session's
    defaults) asks for. Raises ClientError for a bad object, while another response is active, or
    in a transcription session (``unsupported_event``)."""
    if settings.transcription_only:
        raise ClientError(
            "response.create is not supported in a transcription session: it transcribes the caller's audio "
            "and makes no responses (session.type 'transcription').",
            "unsupported_event",
            "type",
        )
    params = {} if params is None else params
    if not isinstance(params, dict):
        raise ClientError("'response' must be an object.", "invalid_type", "response")
    active = responses.active()
    if active is not None:
        raise ClientError(
            f"Conversation already has an active response in progress: {active.id}. "
            "Wait until the response is finished before creating a new one.",
            "conversation_already_has_active_response",
            None,
        )
    request = parse_response_params(params, settings, conversation)
    responses.start(
        request.prompt,
        request.audio,
        metadata=request.metadata,
        conversation=request.conversation,
        max_tokens=request.max_tokens,
        tools=request.tools,
        tool_choice=request.tool_choice,
    )


def cancel_response(responses: ResponseTracker, control: PipelineControl, response_id: Any) -> None:
    """Cancel the active response (``response_id`` None or its id), else stop the audio of the one
    ``response_id`` names that is done generating but still heard or queued; nothing for the first
    cancel of the latest response after a truncate or delete stopped it (:func:`stop_reply_of_item`). Raises
    ClientError for a ``response_id`` that is not a string, or when nothing it names is going on."""
    if response_id is not None and not isinstance(response_id, str):
        raise ClientError("'response_id' must be a string.", "invalid_type", "response_id")
    active = responses.active()
    if active is not None and response_id in (None, active.id):
        responses.cancel(active, reason="client_cancelled")
        return
    if responses.sounding(response_id) is not None:
        # Done generating but still being heard, or queued to be: cancelling it stops the
        # audio. (A client that sent the cancel before our response.done reached it lands here too.)
        responses.interrupted(control.interrupt(), reason="client_cancelled")
        return
    latest = responses.latest
    if latest is not None and latest.stopped_by_item_edit and response_id in (None, latest.id):
        latest.stopped_by_item_edit = False  # the cancel of an interrupt that sent its truncate first: done already
        return
    message = (
        "There is no active response to cancel." if response_id is None else f"Response '{response_id}' is not active."
    )
    raise ClientError(message, "response_cancel_not_active", "response_id" if response_id else None)


def stop_reply_of_item(responses: ResponseTracker, control: PipelineControl, item_id: str) -> None:
    """Before a truncate or a delete of ``item_id``: end the response still generating that item
    (``cancelled``, ``client_cancelled``, as ``response.cancel``), or stop the audio of the one done
    generating whose audio is still queued or heard (``output_audio_buffer.cleared``), keeping in
    the item only the words heard; nothing when no response is going on with it. One
    ``response.cancel`` of it that follows is no error (:func:`cancel_response`)."""
    response = responses.of_item(item_id)
    if response is None:
        return
    response.stopped_by_item_edit = True
    if not response.done:
        responses.cancel(response, reason="client_cancelled")
    else:
        responses.interrupted(control.interrupt(), reason="client_cancelled")
