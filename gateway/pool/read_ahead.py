"""One call's reply prompt read ahead at the caller's pause (``PipelineControl.read_ahead``).

The engine's ``read_ahead`` renders and tokenizes the whole prompt and queues it on the shared
decoder, whose lock a step thread may hold for a while (saving a sequence's state): that work runs
on a worker thread, never on the event loop that paces every caller's audio. The hold it returns
(a :class:`~gateway.models.base.PromptWarm`) is kept only while it is still wanted: a newer draft,
a response asking for another prompt, or the end of the call lets go of it, and a hold that comes
back after that is let go at once. Event loop only, except the worker's engine call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Optional

from gateway.models.base import PromptWarm

log = logging.getLogger(__name__)

# What was asked of the engine: (messages, max_tokens, GenerationOptions), compared by value.
Request = tuple[Any, ...]
Reader = Callable[..., Optional[PromptWarm]]


class PromptReadAhead:
    """The read-ahead of one unit's calls; ``held`` is the hold and its request once it came back."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._wanted: Optional[Request] = None
        self.held: Optional[tuple[PromptWarm, Request]] = None

    def start(self, read: Reader, request: Request) -> None:
        """Let go of any earlier read, then run ``read(*request)`` on a worker thread."""
        self.let_go()
        self._wanted = request
        try:
            self._loop.run_in_executor(None, self._read, read, request)
        except RuntimeError:  # the loop or its executor is shutting down: nothing is read
            self._wanted = None

    def keep_only_for(self, request: Request) -> None:
        """A response asks for ``request``: keep the hold if it is of that prompt and read (the turn
        copies its cells); else let go. (A read still going would only be read beside the turn,
        which waits for it and then reads its last token again: the turn reads it itself.)"""
        held = self.held
        if held is not None and held[1] == request and held[0].done:
            self._wanted = None
            return
        self.let_go()

    def let_go(self) -> None:
        """Stop wanting any read: cancel the hold, and any that comes back later."""
        self._wanted = None
        held, self.held = self.held, None
        if held is not None:
            held[0].cancel()

    # ----- the worker thread, then the loop -----
    def _read(self, read: Reader, request: Request) -> None:
        try:
            warm = read(*request)
        except Exception:
            log.exception("reading a prompt ahead failed")
            return
        if warm is None:
            return
        try:
            self._loop.call_soon_threadsafe(self._arrived, warm, request)
        except RuntimeError:  # the loop is closed: the process is shutting down
            warm.cancel()

    def _arrived(self, warm: PromptWarm, request: Request) -> None:
        if self._wanted is not request:  # superseded, let go of, or the call ended meanwhile
            warm.cancel()
            return
        self.held = (warm, request)


class LatestPromptWarm:
    """A call's instructions and tools read ahead (``PipelineUnit.apply_settings``: the engine's
    ``prepare``) on a worker thread, one read at a time, only the latest wanted.

    ``prepare`` renders and tokenizes the system prompt with every tool; it ran on the event loop
    at each ``session.update``: with 128 tools of 32 KB (the default limits) each update, even one
    that changed a word of the instructions, held the loop (every call's audio, every request)
    for ~8 s, and a client sending updates at the allowed rate froze the process. Now a request
    that comes while a read runs waits for it, and only the newest one waiting is read; ``held``
    is the hold of the latest read that came back still wanted. Event loop only, except the
    worker's engine call."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._wanted: Optional[tuple[Reader, Request]] = None
        self._reading = False
        self.held: Optional[PromptWarm] = None

    def start(self, read: Reader, request: Request) -> None:
        """Let go of the earlier hold; read ``read(*request)`` next (at once unless a read runs)."""
        self.let_go()
        self._wanted = (read, request)
        if not self._reading:
            self._next()

    def let_go(self) -> None:
        """Stop wanting any read: cancel the hold, and any that comes back later."""
        self._wanted = None
        held, self.held = self.held, None
        if held is not None:
            held.cancel()

    def _next(self) -> None:
        wanted = self._wanted
        if wanted is None:
            return
        self._reading = True
        try:
            self._loop.run_in_executor(None, self._read, *wanted)
        except RuntimeError:  # the loop or its executor is shutting down: nothing is read
            self._reading = False

    # ----- the worker thread, then the loop -----
    def _read(self, read: Reader, request: Request) -> None:
        warm: Optional[PromptWarm] = None
        try:
            warm = read(*request)
        except Exception:
            log.exception("reading a call's instructions ahead failed")
        try:
            self._loop.call_soon_threadsafe(self._arrived, warm, request)
        except RuntimeError:  # the loop is closed: the process is shutting down
            if warm is not None:
                warm.cancel()

    def _arrived(self, warm: Optional[PromptWarm], request: Request) -> None:
        self._reading = False
        if self._wanted is not None and self._wanted[1] is request:
            self._wanted = None
            self.held = warm
            return
        if warm is not None:  # superseded, let go of, or the call ended meanwhile
            warm.cancel()
        self._next()
