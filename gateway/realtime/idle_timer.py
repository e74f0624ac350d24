"""``turn_detection.idle_timeout_ms``: prompt a caller who has said nothing for that long.

Reference: the OpenAI Realtime API server VAD ``idle_timeout_ms`` (5000..30000 ms): when it runs out
the server sends ``input_audio_buffer.timeout_triggered`` with the silent span of the input stream
(``audio_start_ms``/``audio_end_ms``) and answers. The timer runs only while the session says it is
wanted (the caller's turn, nobody speaking); the span is estimated from the VAD's reports, since
the input stream advances in real time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Optional

log = logging.getLogger(__name__)

# call_later(delay_s, callback) -> a handle with cancel(), as asyncio's loop.call_later.
CallLater = Callable[[float, Callable[[], None]], Any]


class IdleTimer:
    """Arms ``timeout_ms()`` (ms) when ``wanted()`` and calls ``on_timeout(audio_start_ms,
    audio_end_ms)`` when it runs out (and is still wanted). While armed, ``keep_alive()`` is called
    at once and half-way, so that the call's own idle watchdog does not end the call first.

    ``call_later`` defaults to the running event loop's; ``clock()`` is monotonic seconds.
    """

    def __init__(
        self,
        *,
        wanted: Callable[[], bool],
        timeout_ms: Callable[[], Optional[int]],
        keep_alive: Callable[[], None],
        on_timeout: Callable[[int, int], None],
        call_later: Optional[CallLater],
        clock: Callable[[], float],
    ) -> None:
        self._wanted = wanted
        self._timeout_ms = timeout_ms
        self._keep_alive = keep_alive
        self._on_timeout = on_timeout
        self._call_later = call_later
        self._clock = clock
        self._handles: list[Any] = []
        self._started_ms = 0
        self._anchor = (0, clock())  # (input stream position in ms, clock then)

    # ----- the input stream position -----
    def restart_stream(self) -> None:
        """The caller's input stream starts now (position 0 ms)."""
        self._anchor = (0, self._clock())

    def anchor(self, position_ms: int) -> None:
        """The VAD reported input stream position ``position_ms`` just now."""
        self._anchor = (position_ms, self._clock())

    def position_ms(self) -> int:
        """Estimated position in the caller's input stream, in ms."""
        position, at = self._anchor
        return int(position + (self._clock() - at) * 1000)

    # ----- the timer -----
    @property
    def armed(self) -> bool:
        """True while a timeout is pending."""
        return bool(self._handles)

    def maybe_arm(self) -> None:
        """Start the timeout if it is wanted and not already running."""
        if not self._handles and self._wanted():
            self._arm()

    def disarm(self) -> None:
        """Cancel a pending timeout (speech, a response, a new turn_detection...)."""
        for handle in self._handles:
            handle.cancel()
        self._handles = []

    def _arm(self) -> None:
        schedule = self._call_later
        if schedule is None:
            try:
                schedule = asyncio.get_running_loop().call_later
            except RuntimeError:
                log.warning("no event loop: idle_timeout_ms cannot be honoured")
                return
        timeout_s = (self._timeout_ms() or 0) / 1000
        self._started_ms = self.position_ms()
        self._keep_alive()
        self._handles = [schedule(timeout_s / 2, self._keep_alive), schedule(timeout_s, self._fired)]

    def _fired(self) -> None:
        self._handles = []
        if self._wanted():
            self._on_timeout(self._started_ms, self.position_ms())
