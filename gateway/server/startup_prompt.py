"""The app's prompt read into the LLM at start-up (``llm_warm_session``).

A call's instructions and tools are read into the shared LLM when its session sets them, while its
caller speaks; on a slow box the tool schemas take seconds to read, longer than a short first
question. Every later call with the same instructions and tools finds them read; this setting
makes the process's first call find them read too. The file holds the session object the app sends
(the ``session`` of ``session.update``, or the one sent with an SDP offer or to
``/v1/realtime/client_secrets``), parsed, checked and applied to the configured defaults exactly as
a call's session does, so the prompt read is the one such a call's LLM gets.
"""

from __future__ import annotations

import json
from pathlib import Path

from gateway.config import GatewayConfig
from gateway.pipeline.call_settings import CallSettings
from gateway.realtime.items import ClientError
from gateway.realtime.limits import SessionLimits
from gateway.realtime.session_settings import SessionSettings
from gateway.realtime.session_update import SessionUpdate


def startup_prompt(config: GatewayConfig, limits: SessionLimits) -> CallSettings | None:
    """The call settings of the session object in ``config.llm_warm_session`` (None when unset),
    whose ``instructions``, ``tools`` and ``tool_choice`` make the prompt to read. Raises ValueError
    naming the file for one that cannot be read, is not JSON, or is not a valid session object
    under ``limits``."""
    path = config.llm_warm_session
    if not path:
        return None
    try:
        update = SessionUpdate.from_request(json.loads(Path(path).read_text(encoding="utf-8")), limits)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"llm_warm_session {path}: {exc}") from None
    except ClientError as exc:
        raise ValueError(f"llm_warm_session {path}: {exc}") from None
    if update is None or not isinstance(update.session, dict):
        raise ValueError(f"llm_warm_session {path}: expected a session object")
    settings = SessionSettings.from_pipeline(CallSettings.defaults(config))
    settings.apply(update.changes)
    return settings.call
