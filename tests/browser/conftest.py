"""Fixtures for the real-browser tests: Debian's Chromium driven by Playwright (its own browser
download is never used), a fake microphone fed from a WAV made at test time, and an artifact folder
per test for screenshots.

Without Chromium (or the Playwright package) the tests skip, except under CI, where a missing
browser is a broken setup (``scripts/setup.sh --browser``) and must fail loudly.
"""

from __future__ import annotations

import contextlib
import difflib
import re
import shutil
import wave
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, BinaryIO, Union

import numpy as np
import pytest

from tests import helpers
from tests.helpers import words

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
FIREFOX = Path("/usr/bin/firefox-esr")
ARTIFACTS = ROOT / "artifacts" / "browser"
QUESTION = helpers.QUESTION

# Chromium plays a capture file in a loop, from the moment the page opens the microphone. The lead
# silence covers the offer/answer, ICE and DTLS that come after: with 1 s, a loaded machine (a run
# with other work beside it) lost "What is the" before media flowed. The long tail of silence keeps
# the question from being asked again (and barging in on the answer) before a test is done with its turn.
LEAD_SILENCE_S = 3.0
TRAIL_SILENCE_S = 60.0

# Flags for a quiet, reproducible headless Chromium. Playwright passes most of these already; they
# are repeated so that the set this suite relies on is visible here. Without the background
# networking ones Chromium keeps dialling Google services, which fail noisily on an offline machine.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--use-fake-ui-for-media-stream",  # grant the microphone without a prompt
    "--use-fake-device-for-media-stream",
]


def unavailable(reason: str) -> None:
    """Skip a browser test on a machine without a browser, but fail it under CI (which must have one).
    Also fails where scripts/setup.sh --browser --services ran (tests.helpers.unavailable)."""
    helpers.unavailable(reason)


@pytest.fixture(scope="session")
def chromium_path() -> Path:
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} not found: install Debian's chromium (scripts/setup.sh --browser)")
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        unavailable("the 'playwright' Python package is missing: pip install -e '.[test]'")
    return CHROMIUM


@pytest.fixture(scope="session")
def firefox_path() -> Path:
    if not FIREFOX.exists():
        unavailable(f"{FIREFOX} not found: install Debian's firefox-esr (scripts/setup.sh --browser)")
    return FIREFOX


def write_wav(path: Union[Path, BinaryIO], samples: np.ndarray, rate: int = 48000) -> Union[Path, BinaryIO]:
    """Write int16 mono samples as a PCM WAV (what Chromium's fake capture reads) to a path or a
    binary file object; returns ``path``."""
    with wave.open(str(path) if isinstance(path, Path) else path, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples.astype("<i2").tobytes())
    return path


@pytest.fixture(scope="session")
def question_wav(speech: Callable[[str], np.ndarray], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fake microphone's file: silence, the spoken question, then a long silence."""
    rate = 48000
    voice = speech(QUESTION)
    samples = np.concatenate(
        [
            np.zeros(int(LEAD_SILENCE_S * rate), np.int16),
            voice,
            np.zeros(int(TRAIL_SILENCE_S * rate), np.int16),
        ]
    )
    path = tmp_path_factory.mktemp("mic") / "question.wav"
    write_wav(path, samples, rate)
    return path


@pytest.fixture
def artifacts(request: pytest.FixtureRequest) -> Path:
    """``artifacts/browser/<test name>/``, emptied first, for screenshots and logs."""
    folder = ARTIFACTS / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@contextlib.asynccontextmanager
async def launch_chromium(chromium_path: Path, microphone_wav: Path) -> AsyncIterator[Any]:
    """A headless Debian Chromium (a Playwright ``Browser``) whose microphone plays
    ``microphone_wav`` (48 kHz mono int16, looped); closed on exit."""
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=str(chromium_path),
            headless=True,
            args=[*CHROMIUM_ARGS, f"--use-file-for-fake-audio-capture={microphone_wav}"],
            timeout=30_000,
        )
        try:
            yield browser
        finally:
            await browser.close()


@pytest.fixture
async def chromium(chromium_path: Path, question_wav: Path) -> AsyncIterator[Any]:
    """A headless Debian Chromium whose microphone plays ``question_wav``; closed after the test."""
    async with launch_chromium(chromium_path, question_wav) as browser:
        yield browser


# Inbound audio of a page's RTCPeerConnection, from getStats(): bytes received and the decoded
# audio energy (sum of level^2 x seconds), which only grows while the received audio is not silent.
INBOUND_AUDIO_JS = """
async (pc) => {
  if (!pc) return null;
  const report = await pc.getStats();
  let found = null;
  report.forEach((s) => { if (s.type === 'inbound-rtp' && s.kind === 'audio') found = s; });
  return found && { bytes: found.bytesReceived || 0, energy: found.totalAudioEnergy || 0,
                    samples: found.totalSamplesReceived || 0 };
}
"""


def heard_the_question(transcript: str) -> bool:
    """The gateway understood the fake microphone's question.

    The browser's own capture path (echo cancellation, noise suppression, gain control, Opus) sits
    between the WAV and the gateway, so Whisper may mishear a word: the transcript must hold every
    word of the question but one, in order.
    """
    asked = words(QUESTION)
    blocks = difflib.SequenceMatcher(None, asked, words(transcript)).get_matching_blocks()
    return sum(block.size for block in blocks) >= len(asked) - 1


def console_collector(page: Any, sink: list[str]) -> None:
    """Keep the page's console output and uncaught errors (written to the artifacts on failure)."""
    page.on("console", lambda msg: sink.append(f"console.{msg.type}: {msg.text}"))
    page.on("pageerror", lambda err: sink.append(f"pageerror: {err}"))
