"""The caller's audio clock (CallerMedia): silence stands in for frames only once the caller has
really stopped sending, never for frames that are only delayed."""

from __future__ import annotations

import numpy as np

from gateway.media.media_watch import CallerMedia

RATE = 16000
FRAME = np.full(320, 1000, np.int16)  # 20 ms of (loud) caller audio


def _media(received: list[np.ndarray]) -> CallerMedia:
    async def no_packets() -> None:
        return None

    return CallerMedia(
        rate=RATE,
        on_audio=lambda samples, arrival: received.append(samples),
        on_gone=lambda: None,
        media_timeout_s=10,
        packets_received=no_packets,
    )


def test_frames_delayed_by_jitter_are_not_split_by_silence() -> None:
    received: list[np.ndarray] = []
    media = _media(received)
    media.audio(FRAME, 100.0)
    media._fill(100.15)  # 150 ms late: a busy event loop or a relay, the frames are on their way
    media.audio(FRAME, 100.16)
    media.audio(FRAME, 100.161)
    assert media.filled_ms == 0
    assert all(chunk.any() for chunk in received), "silence was spliced into the caller's words"


def test_a_caller_who_stops_sending_gets_the_whole_gap_as_silence() -> None:
    received: list[np.ndarray] = []
    media = _media(received)
    media.audio(FRAME, 100.0)
    media._fill(100.5)  # DTX / silence suppression: nothing for half a second
    assert 480 <= media.filled_ms <= 520
    assert not received[-1].any() and len(received[-1]) == int(0.5 * RATE)
