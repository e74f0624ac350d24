"""A call's audio recorded as one stereo WAV: the caller on the left channel, the assistant on the
right, both on one timeline from the start of the call.

Each channel streams to its own raw file while the call goes on (int16 mono at :data:`RATE`), so
memory stays bounded whatever the call's length; :meth:`StereoRecording.finish` interleaves the two
into a 16-bit PCM WAV (the stdlib ``wave`` module) beside them and renames it into place (atomic on
one file system). At 16 kHz stereo that is 64 kB a second, 230 MB for an hour's call.

Placement: each channel follows the call's timeline (``time.monotonic()`` seconds, ``started_at``
the call's start); a chunk's *lag* is how far its time lies past the channel's end. A lag over
:data:`JITTER_S` is a gap in the media (a caller on hold, the assistant quiet between replies on a
leg that sends no silence, lost packets): silence goes before the chunk. That silence stays
tentative for :data:`SETTLE_S` (the channel's newest audio is held in memory that long): chunks that
then come *ahead* of the clock show the gap was a stall of the event loop, not of the media (late
chunks, then a burst), and take back as much of it, so a channel is never pushed ahead of the
clock by a stall shorter than that. Smaller lags (jitter) just follow on. Caller audio ends when it
reached the gateway; the assistant's starts when it is played out (the paced WebRTC/RTP frame; for
an event transport, where the caller's playback clock puts it).
:meth:`StereoRecording.cut_assistant` takes back assistant audio that was sent ahead but never
heard (barge-in on an event transport).

A write that fails (disk full) stops the recording, never the call: what reached the work files
is still made into the WAV at the end (:attr:`StereoRecording.failed`, :attr:`StereoRecording.error`
say so), and a WAV that cannot be written leaves the work files in place, for
:func:`write_stereo_wav` to make them a WAV later (``gateway.transports.call_record`` does at the
next start, as it does for the work files of a process that died mid-call). Every file is made
owner-only (:func:`open_private`, mode 0600): recordings are personal data.

Not thread-safe: every method runs on the event loop, except :meth:`finish` / :meth:`discard`
(any thread, once the call's audio has stopped).
"""

from __future__ import annotations

import logging
import os
import wave
from pathlib import Path
from typing import IO, Any, Optional

import numpy as np

from gateway.media.resample import Resampler

log = logging.getLogger(__name__)

RATE = 16000  # Hz, both channels
JITTER_S = 0.1  # a chunk this far past its channel's end comes after a gap: silence before it
SETTLE_S = 1.0  # how long that silence stays tentative (the channel's newest audio held in memory)
_CHUNK = RATE * 10  # samples per channel interleaved at a time when finishing (bounded memory)
_SAMPLE_BYTES = 2
_WAV_HEADER_BYTES = 44  # a PCM WAV's RIFF, fmt and data headers (the wave module writes no others)
_PRIVATE = 0o600  # owner read/write: the mode of every file a recording makes


def open_private(path: Path, mode: str = "wb", **kwargs: Any) -> IO[Any]:
    """``path`` opened for writing (``mode`` as ``open``'s: ``"wb"``, ``"w+b"``, ``"w"``...),
    truncated, with mode 0600 (owner only; ``open`` makes 0644 under the usual umask), also when
    it was there already; never through a symbolic link. Raises OSError."""
    access = os.O_RDWR if "+" in mode else os.O_WRONLY
    fd = os.open(path, access | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), _PRIVATE)
    try:
        os.fchmod(fd, _PRIVATE)
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def write_stereo_wav(path: Path, left: Optional[Path], right: Optional[Path], frames: int) -> None:
    """Write ``path``: a 16-bit PCM stereo WAV at :data:`RATE` Hz of ``frames`` frames, its left
    channel from the raw int16 mono file ``left``, its right from ``right`` (None: no file), each
    padded with silence where it is shorter (a trailing odd byte is ignored). Bounded memory (10 s
    at a time). Raises OSError; ``path`` may then hold half a file (write it under a work name)."""
    with (
        open(left, "rb") if left is not None else open(os.devnull, "rb") as left_file,
        open(right, "rb") if right is not None else open(os.devnull, "rb") as right_file,
        open_private(path, "wb") as out_file,
        wave.open(out_file, "wb") as out,
    ):
        out.setnchannels(2)
        out.setsampwidth(_SAMPLE_BYTES)
        out.setframerate(RATE)
        for start in range(0, frames, _CHUNK):
            count = min(_CHUNK, frames - start)
            stereo = np.zeros(2 * count, dtype="<i2")
            for channel, source in enumerate((left_file, right_file)):
                data = source.read(count * _SAMPLE_BYTES)
                samples = np.frombuffer(data[: len(data) // _SAMPLE_BYTES * _SAMPLE_BYTES], dtype="<i2")
                stereo[channel : 2 * samples.size : 2] = samples
            out.writeframes(stereo.tobytes())


def raw_samples(path: Path) -> int:
    """Whole int16 samples in the raw file ``path`` (0 when there is none)."""
    try:
        return path.stat().st_size // _SAMPLE_BYTES
    except FileNotFoundError:
        return 0


class _Channel:
    """One channel: its raw int16 file, then its newest audio still held in memory (``_held``:
    [tentative silence before, audio] pairs, the newest last; at most about SETTLE_S), and where it
    ends (``samples``, at :data:`RATE`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file: Optional[IO[bytes]] = open_private(path, "w+b")  # held for the call
        self.samples = 0  # written and held
        self.failed = False  # a write failed: nothing more is written
        self._written = 0
        self._held: list[list[Any]] = []
        self._resampler: Optional[Resampler] = None
        self._rate: Optional[int] = None

    def to_rate(self, samples: np.ndarray, rate: int) -> np.ndarray:
        if rate == RATE:
            return samples
        if self._resampler is None or self._rate != rate:
            self._resampler, self._rate = Resampler(RATE), rate
        return self._resampler.resample_array(samples, rate)

    def put(self, position: int, samples: np.ndarray) -> None:
        """Add ``samples`` (int16 at RATE) whose time is sample ``position`` of the timeline (see
        the module's docstring for gaps, stalls and jitter)."""
        if self.file is None or not samples.size:
            return
        lag = position - self.samples
        silence = lag if lag > int(JITTER_S * RATE) else 0
        if lag < 0:  # ahead of the clock: a gap before was a stall; take its silence back
            self._take_back(-lag)
        self._held.append([silence, np.ascontiguousarray(samples, dtype="<i2")])
        self.samples += silence + samples.size
        held = sum(gap + audio.size for gap, audio in self._held)
        while self._held and held - (self._held[0][0] + self._held[0][1].size) >= int(SETTLE_S * RATE):
            gap, audio = self._held.pop(0)
            held -= gap + audio.size
            self._write(gap, audio)

    def _take_back(self, count: int) -> None:
        for entry in reversed(self._held):
            take = min(count, entry[0])
            entry[0] -= take
            self.samples -= take
            count -= take
            if not count:
                return

    def _write(self, gap: int, audio: np.ndarray) -> None:
        assert self.file is not None
        self._silence(gap)
        self.file.write(audio.tobytes())
        self._written += gap + audio.size

    def flush(self) -> None:
        """Write what is held."""
        for gap, audio in self._held:
            self._write(gap, audio)
        self._held = []

    def cut(self, position: int) -> None:
        """Drop what lies past sample ``position``."""
        position = max(0, position)
        while self._held and self.samples > position:
            gap, audio = self._held[-1]
            keep = max(0, audio.size - (self.samples - position))
            self.samples -= audio.size - keep
            if keep:
                self._held[-1][1] = audio[:keep]
                return
            self._held.pop()
            keep_gap = max(0, gap - (self.samples - position))
            self.samples -= gap - keep_gap
            if keep_gap:
                self._held.append([keep_gap, audio[:0]])
                return
        if self.file is not None and position < self._written:
            self.file.truncate(position * _SAMPLE_BYTES)
            self.file.seek(0, os.SEEK_END)
            self._written = self.samples = position

    def _silence(self, count: int) -> None:
        assert self.file is not None
        zeros = bytes(_SAMPLE_BYTES * min(count, RATE))
        while count > 0:
            step = min(count, RATE)
            self.file.write(zeros[: step * _SAMPLE_BYTES])
            count -= step

    def close(self) -> None:
        """Close the file (what it still buffers is written: raises OSError when that fails; the
        file is closed all the same)."""
        file, self.file = self.file, None
        if file is not None:
            file.close()

    def close_quietly(self) -> None:
        """:meth:`close`, what fails to be written dropped."""
        try:
            self.close()
        except OSError:
            pass


class StereoRecording:
    """The audio of one call, recorded from ``started_at`` (``time.monotonic()`` s).

    ``prefix`` names the work files: ``<prefix>.caller.raw``, ``<prefix>.assistant.raw`` and,
    while finishing, ``<prefix>.wav`` (the caller picks a hidden name in the final directory, so
    that the rename is atomic). Raises OSError when the files cannot be made. A write that fails
    later (disk full) stops the recording, never the call: ``failed`` becomes True and ``error``
    says why; :meth:`finish` writes what reached the files. ``paused``: audio that comes in is
    dropped (the timeline goes on: it becomes silence).
    """

    def __init__(self, prefix: Path, started_at: float) -> None:
        self.started_at = started_at
        self.paused = False
        self.failed = False
        self.error: Optional[str] = None
        self._prefix = prefix
        self._caller = _Channel(work_file(prefix, "caller"))
        try:
            self._assistant = _Channel(work_file(prefix, "assistant"))
        except OSError:
            self._caller.close()
            self._caller.path.unlink(missing_ok=True)
            raise

    def _position(self, when: float) -> int:
        return max(0, round((when - self.started_at) * RATE))

    def caller(self, samples: np.ndarray, rate: int, received_at: float) -> None:
        """Caller audio (int16 mono at ``rate`` Hz) that reached the gateway at ``received_at``
        (monotonic s): it ended then."""
        if self.paused or self.failed:
            return
        try:
            audio = self._caller.to_rate(samples, rate)
            self._caller.put(self._position(received_at) - audio.size, audio)
        except OSError as exc:
            self._fail(exc, self._caller)

    def assistant(self, samples: np.ndarray, rate: int, played_at: float) -> None:
        """Assistant audio (int16 mono at ``rate`` Hz; silence included) played from ``played_at``
        (monotonic s) on."""
        if self.paused or self.failed:
            return
        try:
            audio = self._assistant.to_rate(samples, rate)
            self._assistant.put(self._position(played_at), audio)
        except OSError as exc:
            self._fail(exc, self._assistant)

    def cut_assistant(self, at: float) -> None:
        """Assistant audio placed after ``at`` (monotonic s) was never heard: drop it."""
        if self.failed:
            return
        try:
            self._assistant.cut(self._position(at))
        except OSError as exc:
            self._fail(exc, self._assistant)

    def _fail(self, exc: OSError, channel: _Channel) -> None:
        channel.failed = True
        if not self.failed:
            log.error("recording %s stopped: %s", self._prefix.name, exc)
            self.failed, self.error = True, exc.strerror or str(exc)

    def wav_bytes(self, ended_at: float) -> int:
        """The size of the WAV :meth:`finish` will write for a call that ended at ``ended_at``
        (monotonic s), in bytes: its header and 4 bytes a frame (a recording that did not fail)."""
        frames = max(self._position(ended_at), self._caller.samples, self._assistant.samples)
        return _WAV_HEADER_BYTES + 2 * _SAMPLE_BYTES * frames

    def finish(self, path: Path, ended_at: float) -> float:
        """Write the stereo WAV to ``path`` (16-bit PCM, :data:`RATE` Hz, caller left, assistant
        right), both channels padded with silence to the call's length (``ended_at``, monotonic
        s) or to the longer of them; the work files are removed. A recording that failed
        (:attr:`failed`) ends where its audio stopped reaching the work files (the longer
        channel's end; the failed channel's audio held in memory is left out). Returns the WAV's
        length in seconds. Raises OSError, or whatever went wrong: nothing is left at ``path``
        then, and the work files are kept (:func:`write_stereo_wav` makes them a WAV later)."""
        channels = (self._caller, self._assistant)
        for channel in channels:
            try:
                if not channel.failed:
                    channel.flush()
                channel.close()
            except OSError as exc:
                self._fail(exc, channel)
                channel.close_quietly()
        written = [raw_samples(channel.path) for channel in channels]
        length = max(written) if self.failed else max(self._position(ended_at), *written)
        partial = self._prefix.with_name(self._prefix.name + ".wav")
        try:
            write_stereo_wav(partial, self._caller.path, self._assistant.path, length)
            os.replace(partial, path)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        self.discard()
        return length / RATE

    def discard(self) -> None:
        """Close and remove the work files (nothing is written)."""
        for channel in (self._caller, self._assistant):
            channel.close_quietly()
            channel.path.unlink(missing_ok=True)


def work_file(prefix: Path, channel: str) -> Path:
    """The raw work file of ``channel`` (``"caller"``, ``"assistant"``) of the recording whose work
    files are named ``prefix``: ``<prefix>.<channel>.raw``, int16 mono at :data:`RATE` Hz, from the
    start of the call's timeline."""
    return prefix.with_name(f"{prefix.name}.{channel}.raw")
