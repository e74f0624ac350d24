"""Fixtures of the bridge tests: the SIP tests' test speech at 8 kHz (the phone's microphone)."""

from tests.transports.sip.conftest import speech_8k

__all__ = ["speech_8k"]
