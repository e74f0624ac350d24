"""The app's session read into the LLM at start-up (``llm_warm_session``).

A session's instructions and tools are read into the shared LLM when a call sets them, while its
caller speaks; on a slow box the tool schemas take seconds to read, longer than a short first
question. Every later call with the same instructions and tools finds them read; this setting
makes the process's first call find them read too. The file holds the session object the app sends
(the ``session`` of ``session.update``, or the one sent with an SDP offer or to
``/v1/realtime/client_secrets``), parsed and checked exactly as those are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from gateway.config import GatewayConfig
from gateway.models.base import FunctionTool
from gateway.realtime.items import ClientError
from gateway.realtime.limits import SessionLimits
from gateway.realtime.session_update import SessionUpdate
from gateway.realtime.tools import engine_tool_choice


@dataclass(frozen=True)
class WarmSession:
    """What a session's prompt starts with: its instructions, its tools and the engine's tool_choice."""

    instructions: str
    tools: list[FunctionTool]
    tool_choice: str


def warm_session(config: GatewayConfig, limits: SessionLimits) -> WarmSession | None:
    """The session of ``config.llm_warm_session`` (None when unset). Raises ValueError naming the
    file for one that cannot be read, is not JSON, or is not a valid session object under ``limits``."""
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
    changes = update.changes
    tools = list(changes.get("tools") or [])
    instructions = changes.get("instructions")
    return WarmSession(
        instructions if isinstance(instructions, str) else config.instructions,
        tools,
        engine_tool_choice(changes.get("tool_choice", "auto"), tools),
    )
