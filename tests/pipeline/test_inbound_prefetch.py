"""The inbound reader drops aiortc's 80 ms receive prefetch (the gateway reads its track, it does not
play it), and leaves a receiver alone when aiortc's private attributes are not what it expects."""

from __future__ import annotations

import logging

import pytest
from aiortc import RTCPeerConnection
from aiortc.jitterbuffer import JitterBuffer

from gateway.media import inbound
from gateway.media.inbound import drop_receive_prefetch


async def test_a_real_audio_receiver_loses_its_prefetch() -> None:
    pc = RTCPeerConnection()
    try:
        receiver = pc.addTransceiver("audio", direction="recvonly").receiver
        buffer = receiver._RTCRtpReceiver__jitter_buffer
        assert buffer._prefetch == 4  # aiortc's default, what this guards against
        assert drop_receive_prefetch(receiver)
        assert receiver._RTCRtpReceiver__jitter_buffer is buffer and buffer._prefetch == 0
    finally:
        await pc.close()


def test_a_frame_leaves_the_buffer_as_soon_as_it_is_complete() -> None:
    from aiortc.rtp import RtpPacket

    class Holder:
        pass

    holder = Holder()
    holder._RTCRtpReceiver__jitter_buffer = JitterBuffer(capacity=16, prefetch=4)
    assert drop_receive_prefetch(holder)
    buffer = holder._RTCRtpReceiver__jitter_buffer
    packets = [RtpPacket(sequence_number=n, timestamp=960 * n) for n in (1, 2)]
    for packet in packets:
        packet._data = b"opus"  # what the receiver's depacketizer sets
    _, first = buffer.add(packets[0])
    _, second = buffer.add(packets[1])
    assert first is None and second is not None and second.timestamp == 960  # one packet later, not four


def test_unknown_receiver_is_left_alone_and_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(inbound, "_warned_prefetch", False)
    with caplog.at_level(logging.INFO, logger="gateway.media.inbound"):
        assert not drop_receive_prefetch(object())
        assert not drop_receive_prefetch(object())
    assert len([r for r in caplog.records if "prefetch" in r.getMessage()]) == 1
