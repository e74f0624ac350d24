"""VAD stage: find where the caller's turns start and end in the 16 kHz input stream."""

from __future__ import annotations

import time
from collections import deque
from typing import Optional

import numpy as np

from gateway.models.base import VoiceActivityDetector
from gateway.pipeline.events import InputCommitted, InputRejected, SpeechStarted, SpeechStopped
from gateway.pipeline.latency import TurnLatency
from gateway.pipeline.messages import AudioIn, ClearInput, CommitInput, Message, Utterance
from gateway.pipeline.stage import Stage
from gateway.pipeline.turn import TurnDetection

# Speech ends when the probability falls this far below the threshold (hysteresis, as silero's own
# get_speech_timestamps does), so a turn does not flicker on and off at the threshold.
_HYSTERESIS = 0.15


class VadStage(Stage):
    """Consumes :class:`AudioIn` (int16, 16 kHz); emits :class:`Utterance` to STT.

    Server VAD: a turn starts after ``min_speech_ms`` of speech (``ctx.on_speech_started`` barges
    in and reports SpeechStarted), keeps ``prefix_padding_ms`` of audio
    before it, and ends after ``silence_duration_ms`` of silence. Manual mode buffers everything
    until :class:`CommitInput`.
    """

    name = "vad"

    def __init__(self, ctx, inbox, outbox, vad: VoiceActivityDetector) -> None:
        super().__init__(ctx, inbox, outbox)
        self._vad_model = vad
        self._vad = vad.new_session()
        self._chunk = vad.chunk_samples
        self._rate = vad.sample_rate
        self.reset()

    def reset(self) -> None:
        self._vad.reset()
        self._pending = np.zeros(0, np.float32)  # < one chunk not yet run through the VAD
        self._position = 0  # samples of input seen this session
        self._prefix: deque[np.ndarray] = deque()
        self._candidate: list[np.ndarray] = []  # voiced chunks not yet long enough to count
        self._candidate_start = 0
        self._utterance: list[np.ndarray] = []
        self._in_speech = False
        self._silence = 0
        self._speech_start = 0
        self._last_voiced_at: Optional[float] = None
        self._session = ""

    # --- messages ---
    def handle(self, message: Message) -> None:
        # Events carry the id of the session whose audio this is (not whatever the unit serves now).
        self._session = message.session_id
        if isinstance(message, AudioIn):
            self._on_audio(message)
        elif isinstance(message, CommitInput):
            self._commit(manual=True)
        elif isinstance(message, ClearInput):
            self._utterance, self._candidate, self._in_speech, self._silence = [], [], False, 0

    def _on_audio(self, message: AudioIn) -> None:
        audio = message.samples.astype(np.float32) / 32768.0
        self._pending = np.concatenate([self._pending, audio])
        turn: TurnDetection = self.ctx.turn
        while len(self._pending) >= self._chunk:
            chunk, self._pending = self._pending[: self._chunk], self._pending[self._chunk :]
            self._position += self._chunk
            if turn.mode == "manual":
                self._utterance.append(chunk)
                self._last_voiced_at = message.received_at
                self._cap_manual_buffer(turn)
                continue
            probability = self._vad.speech_probability(chunk)
            self._step(chunk, probability, message.received_at, turn)

    def _step(self, chunk: np.ndarray, probability: float, received_at: float, turn: TurnDetection) -> None:
        chunk_ms = self._chunk * 1000 / self._rate
        if not self._in_speech:
            if probability >= turn.threshold:
                if not self._candidate:
                    self._candidate_start = self._position - self._chunk
                self._candidate.append(chunk)
                self._last_voiced_at = received_at
                if len(self._candidate) * chunk_ms >= turn.min_speech_ms:
                    self._start_turn(turn)
            else:
                # A short blip is not a turn; it becomes prefix audio.
                for held in self._candidate:
                    self._remember_prefix(held, turn)
                self._candidate = []
                self._remember_prefix(chunk, turn)
            return
        self._utterance.append(chunk)
        if probability >= turn.threshold - _HYSTERESIS:
            self._silence = 0
            self._last_voiced_at = received_at
        else:
            self._silence += self._chunk
        utterance_s = len(self._utterance) * self._chunk / self._rate
        if self._silence * 1000 / self._rate >= turn.silence_duration_ms or utterance_s >= turn.max_utterance_s:
            self.ctx.notify(SpeechStopped(self._session, audio_end_ms=self._ms(self._position - self._silence)))
            self._commit(manual=False)

    def _start_turn(self, turn: TurnDetection) -> None:
        self._in_speech = True
        self._silence = 0
        self._speech_start = self._candidate_start
        self._utterance = list(self._prefix) + self._candidate
        self._prefix.clear()
        self._candidate = []
        # The unit cancels any reply first and then reports the event: barge-in is not delayed by it.
        self.ctx.on_speech_started(SpeechStarted(self._session, audio_start_ms=self._ms(self._speech_start)))

    def _remember_prefix(self, chunk: np.ndarray, turn: TurnDetection) -> None:
        self._prefix.append(chunk)
        keep = max(0, int(turn.prefix_padding_ms * self._rate / 1000 / self._chunk))
        while len(self._prefix) > keep:
            self._prefix.popleft()

    def _cap_manual_buffer(self, turn: TurnDetection) -> None:
        limit = int(turn.max_utterance_s * self._rate / self._chunk)
        if len(self._utterance) > limit:
            del self._utterance[: len(self._utterance) - limit]

    def _commit(self, manual: bool) -> None:
        if manual and self._pending.size:
            self._utterance.append(self._pending)
            self._pending = np.zeros(0, np.float32)
        if manual and self._candidate:
            self._utterance.extend(self._candidate)
            self._candidate = []
        if not self._utterance:
            if manual:
                self.ctx.notify(
                    InputRejected(
                        self._session,
                        code="input_audio_buffer_commit_empty",
                        message="Error committing input audio buffer: the buffer is empty.",
                    )
                )
            return
        audio = np.concatenate(self._utterance)
        now = time.monotonic()
        latency = TurnLatency(speech_end=self._last_voiced_at or now, end_of_turn=now)
        self._utterance, self._in_speech, self._silence = [], False, 0
        self.ctx.notify(InputCommitted(self._session, audio_ms=self._ms(len(audio))))
        self.emit(Utterance(self._session, audio=audio, latency=latency))

    def _ms(self, samples: int) -> int:
        return int(samples * 1000 / self._rate)
