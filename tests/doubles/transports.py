"""The edges' doubles: a door whose pool is always full, a SIP peer that keeps what it is sent, and a
recording file whose disk fills up once."""

from __future__ import annotations

import errno
from typing import IO, Any


class FullPoolDoorDouble:
    """A door (``gateway.transports.door.Door``) whose pool is always full, for the SIP user agent
    (``gateway.transports.sip``): every INVITE that gets that far is refused (``pool_full``, retry
    in ``retry_after_s``) and answered 503, so the SIP layers run without models."""

    def __init__(self, retry_after_s: int = 5) -> None:
        self.opened = 0
        self.retry_after_s = retry_after_s

    def open(self, kind: Any, update: Any, connect: Any, **options: Any) -> Any:
        from gateway.transports.door import Refused

        self.opened += 1
        raise Refused("pool_full", f"every unit is busy (double); retry in {self.retry_after_s} s.", self.retry_after_s)


class RecordingPeerDouble:
    """A SIP peer (``gateway.transports.sip.transactions.Peer``) that keeps what is sent to it."""

    def __init__(self, reliable: bool = False) -> None:
        self.reliable = reliable
        self.transport = "TCP" if reliable else "UDP"
        self.address = ("127.0.0.1", 15070)
        self.sent: list[bytes] = []

    def send(self, data: bytes) -> None:
        self.sent.append(data)


class DiskFullOnceFileDouble:
    """A binary file whose ``fail_at``-th write (from 1) meets a full disk once: it writes the first
    ``partial_bytes`` of the data (as a short write does) and raises ``OSError(ENOSPC)``. Every
    other call goes to ``file``. ``writes`` counts the writes."""

    def __init__(self, file: IO[bytes], fail_at: int, partial_bytes: int = 301) -> None:
        self._file = file
        self.fail_at = fail_at
        self.partial_bytes = partial_bytes
        self.writes = 0

    def write(self, data: bytes) -> int:
        self.writes += 1
        if self.writes == self.fail_at:
            self._file.write(bytes(data)[: self.partial_bytes])
            raise OSError(errno.ENOSPC, "No space left on device")
        return self._file.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)
