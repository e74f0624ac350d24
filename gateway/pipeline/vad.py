"""VAD stage: find where the caller's turns start and end in the 16 kHz input stream."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Optional

import numpy as np

from gateway.media.echo_reference import MAX_DELAY_MS
from gateway.media.noise_suppression import NoiseSuppressor, suppressor_for
from gateway.models.base import EndOfTurnModel, VoiceActivityDetector
from gateway.models.compute.core_use import CORE_USE
from gateway.pipeline.bargein import BargeInDecider, BargeInRules
from gateway.pipeline.drafts import SpeakingDrafts
from gateway.pipeline.events import (
    InputCommitted,
    InputRejected,
    SpeechResumed,
    SpeechStarted,
    SpeechStopped,
    TranscriptDrafted,
)
from gateway.pipeline.latency import TurnLatency
from gateway.pipeline.messages import AudioIn, BargeInHeard, ClearInput, CommitInput, Message, Utterance
from gateway.pipeline.queues import StageQueue
from gateway.pipeline.stage import StageContext
from gateway.pipeline.standing_cut import QUIET_ABOVE, StandingCut
from gateway.pipeline.turn import PauseRules, TurnDetection, pause_rules
from gateway.pipeline.vad_held import HeldTurnStage

log = logging.getLogger(__name__)

# Speech ends when the probability falls this far below the threshold (hysteresis, as silero's own
# get_speech_timestamps does), so a turn does not flicker on and off at the threshold.
_HYSTERESIS = 0.15
# Caller audio the echo guard compares with the reply's, ms (the turn's first chunks and before).
_ECHO_WINDOW_MS = 256
# Audio kept after a held turn ended, for a second part that joins it (the pause and that part's
# first chunks; a held turn is decided within a few timeouts of its onset), in 32 ms chunks: 6 s.
_AFTER_HELD_END_CHUNKS = 188
# The least audio a client's input_audio_buffer.commit takes, ms (OpenAI Realtime: a shorter buffer is
# refused with code input_audio_buffer_commit_empty, "buffer too small. Expected at least 100ms of audio").
MIN_COMMIT_MS = 100


class VadStage(HeldTurnStage):
    """Consumes :class:`AudioIn` (int16, 16 kHz); emits :class:`Utterance` to STT. With the call's
    ``noise_reduction`` set, the audio is noise-suppressed first (``gateway.media.noise_suppression``,
    one suppressor per call, made anew when the type changes), so VAD and STT both get it.

    Server VAD: a turn starts after ``min_speech_ms`` of speech (``ctx.on_speech_started`` barges
    in and reports SpeechStarted) and keeps ``prefix_padding_ms`` of audio before it. It ends at a
    pause, by the call's :class:`~gateway.pipeline.turn.PauseRules`: with the semantic model
    (``end_of_turn``, Smart Turn) the pause is judged once it is ~200 ms long, and the turn ends
    then if the model says it is complete, else after ``silence_duration_ms`` (longer when the
    model says the caller is mid-thought); without it, or for a client's ``server_vad``, after
    ``silence_duration_ms`` of silence. Manual mode buffers everything until :class:`CommitInput`.

    A client's commit (:class:`CommitInput`, ``input_audio_buffer.commit``), in either mode, takes
    all the audio heard since the last commit or the end of the last turn (OpenAI commits the whole
    input buffer), up to ``max_utterance_s`` of it, and the VAD starts afresh after it (a turn in
    progress ends there: what follows is a new one). Less than ``MIN_COMMIT_MS`` is refused with an
    :class:`InputRejected` (``input_audio_buffer_commit_empty``) and the audio kept.

    Speculative STT: at the first pause of ~120 ms the turn so far goes to STT as a speculative
    :class:`Utterance` (never reported by itself); the finished turn names it in ``speculation``
    only when no voiced chunk came after it, so STT may use its text. While the caller speaks, a
    draft of the turn so far goes to STT at dips in the speech (``gateway.pipeline.drafts``), for
    the LLM to read the prompt ahead; the pause's transcript is the draft cut in that pause when
    nothing but silence followed it. Counters (read by metrics):
    ``speculations`` sent, ``semantic_checks`` made, ``semantic_complete`` (checks that ended the turn).

    Barge-in under the reply's audio (``gateway.pipeline.bargein``): a turn that starts while reply
    audio plays pauses it (``ctx.pause_reply``) and is held (no SpeechStarted) until the
    :class:`BargeInDecider` says interrupt (the held events go out as they happened, the unit
    cancels the reply) or resume (the reply plays on and the turn is dropped). The echo guard
    (``turn.echo_guard``) keeps speech that is mostly the reply's own echo from starting a turn.
    Counters: ``echo_rejections`` (turn starts refused as echo), ``backchannels`` (turns dropped),
    ``joined_parts`` (speech that joined a held turn the VAD had ended at a pause, before its decision).
    """

    name = "vad"

    def __init__(
        self,
        ctx: StageContext,
        inbox: StageQueue,
        outbox: Optional[StageQueue],
        vad: VoiceActivityDetector,
        end_of_turn: Optional[EndOfTurnModel] = None,
    ) -> None:
        super().__init__(ctx, inbox, outbox)
        self._vad_model = vad
        self._vad = vad.new_stream()
        self._chunk = vad.chunk_samples
        self._rate = vad.sample_rate
        self._end_of_turn = end_of_turn if end_of_turn is None or end_of_turn.sample_rate == vad.sample_rate else None
        self._model_window = int(8 * self._rate / self._chunk)  # chunks of the last 8 s, what Smart Turn reads
        self._model_failed = False
        self.speculations = 0
        self.semantic_checks = 0
        self.semantic_complete = 0
        self.echo_rejections = 0
        self.backchannels = 0
        self.joined_parts = 0
        self._barge = BargeInDecider(self._rate)
        self._drafts = SpeakingDrafts(self._rate)
        self.reset()

    def reset(self) -> None:
        self._vad.reset()
        self._suppressor: Optional[NoiseSuppressor] = None  # the call's, while noise_reduction is set
        self._pending = np.zeros(0, np.float32)  # < one chunk not yet run through the VAD
        self._position = 0  # samples of input seen this call
        self._uncommitted: deque[np.ndarray] = deque()  # chunks since the last commit or turn end
        self._prefix: deque[np.ndarray] = deque()
        self._candidate: list[np.ndarray] = []  # voiced chunks not yet long enough to count
        self._candidate_start = 0
        self._utterance: list[np.ndarray] = []
        self._in_speech = False
        self._silence = 0
        self._speech_start = 0
        self._last_voiced_at: Optional[float] = None
        self._call = ""
        self._reset_pause()
        self._speculation = 0  # number of the last speculative utterance sent this call
        self._cut = StandingCut()  # the last one's: it stands while only silence followed it
        self._speculation_voided = threading.Event()  # the last one's: set when the caller went on
        self._quiet_void = False  # the last one was voided by a quiet chunk, and the caller not yet went on
        self._drafts.start()
        self._barge.clear()
        self._held_start: Optional[SpeechStarted] = None  # the held turn's SpeechStarted
        self._held_end: Optional[tuple[SpeechStopped, InputCommitted, Utterance]] = None
        self._after_held_end: deque[np.ndarray] = deque(maxlen=_AFTER_HELD_END_CHUNKS)  # chunks since it ended
        self._resume_reported = False
        self._echo_since = 0.0  # monotonic s from which the reply's words may echo in the held turn's probes
        self._probe_skip = 0  # samples of the held turn's echoed prefix its probes leave out

    def _reset_pause(self) -> None:
        self._pause_probability: Optional[float] = None  # the semantic model's answer for this pause
        self._speculated_in_pause = False

    # --- messages ---
    def handle(self, message: Message) -> None:
        # Events carry the id of the call whose audio this is (not whatever the unit serves now).
        self._call = message.call_id
        if isinstance(message, AudioIn):
            self._on_audio(message)
        elif isinstance(message, CommitInput):
            self._commit(manual=True)
        elif isinstance(message, ClearInput):
            self._utterance, self._candidate, self._in_speech, self._silence = [], [], False, 0
            self._uncommitted.clear()
            self._pending = np.zeros(0, np.float32)
            self._reset_pause()
            self._void_speculation()
            self._drafts.void()
            if self._barge.held:
                self._drop_held()
        elif isinstance(message, BargeInHeard):
            echo = tuple(self.ctx.reply_words_since(self._echo_since)) if self._barge.held else ()
            self._log_heard(message, echo)
            self._act(
                self._barge.heard(message.speculation, message.transcript, message.words, message.trusted, echo=echo)
            )

    def _on_audio(self, message: AudioIn) -> None:
        samples = message.samples
        settings = self.ctx.settings  # one value for the whole message, whatever an update does meanwhile
        self._suppressor = suppressor_for(settings.noise_reduction, self._suppressor, self._rate)
        if self._suppressor is not None:
            samples = self._suppressor.process(samples)  # before VAD, so STT hears it too
        audio = samples.astype(np.float32) / 32768.0
        self._pending = np.concatenate([self._pending, audio])
        turn = settings.turn
        while len(self._pending) >= self._chunk:
            chunk, self._pending = self._pending[: self._chunk], self._pending[self._chunk :]
            self._position += self._chunk
            self._keep_uncommitted(chunk, turn)
            if turn.mode == "manual":
                self._last_voiced_at = message.received_at
                continue
            probability = self._vad.speech_probability(chunk)
            if self._held_end is not None:
                self._after_held_end.append(chunk)  # a second part joins the held turn with its pause
            self._step(chunk, probability, message.received_at, turn)
            if self._barge.held:
                voiced = self._in_speech and self._silence == 0
                self._act(self._barge.on_chunk(self._position, voiced, self._silence if self._in_speech else 0))

    def _step(self, chunk: np.ndarray, probability: float, received_at: float, turn: TurnDetection) -> None:
        chunk_ms = self._chunk * 1000 / self._rate
        if not self._in_speech:
            if probability >= turn.threshold:
                if not self._candidate:
                    self._candidate_start = self._position - self._chunk
                self._candidate.append(chunk)
                self._last_voiced_at = received_at
                if len(self._candidate) * chunk_ms >= turn.min_speech_ms and not self._is_echo(turn, received_at):
                    self._start_turn(turn, received_at)
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
            self._reset_pause()
            self._void_speculation()  # the caller went on: a speculation no longer covers the turn
            self._drafts.spoke()
            self._draft_while_speaking(turn, dip=False)
        else:
            self._silence += self._chunk
            if probability >= QUIET_ABOVE:
                if self._cut.quiet():
                    self._speculation_ended(went_on=False)
                self._drafts.spoke(quiet=True)
            else:
                self._cut.still()
                self._drafts.still()
                self._draft_while_speaking(turn, dip=True)
        rules = pause_rules(turn, self._end_of_turn is not None)
        silence_ms = self._silence * 1000 / self._rate
        if self._silence:
            self._judge_pause(rules, silence_ms)
        utterance_s = len(self._utterance) * self._chunk / self._rate
        if silence_ms >= rules.wait_ms(self._pause_probability) or utterance_s >= turn.max_utterance_s:
            stopped = SpeechStopped(self._call, audio_end_ms=self._ms(self._position - self._silence))
            if self._barge.held and not self._barge.ended:
                self._hold_end(stopped)
                return
            self.ctx.notify(stopped)
            self._commit(manual=False)

    def _judge_pause(self, rules: PauseRules, silence_ms: float) -> None:
        """Within a pause: start speculative STT, then ask the semantic model, each once per pause.
        The speculation is the draft cut in this pause when it stands for the turn so far
        (``gateway.pipeline.drafts``); a new transcription waits while STT still has turns queued
        (it would only add to their wait)."""
        if rules.speculate_ms is not None and silence_ms >= rules.speculate_ms and not self._speculated_in_pause:
            draft = self._drafts.take()
            if draft or self.outbox is None or len(self.outbox) == 0:
                self._speculated_in_pause = True
                self._speculate(draft)
        if rules.check_ms is not None and self._pause_probability is None and silence_ms >= rules.check_ms:
            self._pause_probability = self._ask_model()
            if self._pause_probability is not None and self._pause_probability > rules.complete_above:
                self.semantic_complete += 1

    def _speculate(self, draft: int = 0) -> None:
        """Send the pause's speculative transcript: the turn so far, or ``draft``'s text (> 0: the
        number of the draft that stands for it)."""
        self._speculation += 1
        self._cut.cut()
        self.speculations += 1
        audio = np.concatenate(self._utterance)
        if not draft:
            self._drafts.covered(audio.size)
        self._speculation_voided = voided = threading.Event()
        self._quiet_void = False
        self.emit(
            Utterance(
                self._call, audio=audio, speculative=True, speculation=self._speculation, voided=voided, draft=draft
            )
        )

    def _draft_while_speaking(self, turn: TurnDetection, dip: bool) -> None:
        """At a chunk of a turn (not one held under the reply's audio; ``dip``: a silent one): send
        the turn so far to STT as a draft when one is due (``gateway.pipeline.drafts``), the turn
        is drafted (``TurnDetection.drafts_while_speaking``) and STT has nothing queued."""
        if not turn.drafts_while_speaking or self._barge.held:
            return
        if self.outbox is not None and len(self.outbox) > 0:
            return
        samples = len(self._utterance) * self._chunk  # every chunk of a turn is one VAD chunk
        if self._drafts.due(samples, dip, self._silence):
            number, voided = self._drafts.sent(samples, dip)
            audio = np.concatenate(self._utterance)
            self.emit(Utterance(self._call, audio=audio, speculative=True, speaking=True, voided=voided, draft=number))

    def _void_speculation(self) -> None:
        """The caller spoke again (or the client cleared the turn): the pause's speculation no longer
        stands for the turn (SpeechResumed, once: a preemptive reply made from it is discarded), STT
        need not transcribe it, and drops its text if it was transcribing it; also one a quiet
        chunk ended before (``_speculation_ended``)."""
        if self._cut.voiced():
            self._speculation_ended(went_on=True)
        elif self._quiet_void:
            self._quiet_void = False
            self._speculation_voided.set()

    def _speculation_ended(self, went_on: bool) -> None:
        """The standing speculation was ended: by a voiced chunk (``went_on``: STT need not
        transcribe it), or by a quiet one (``gateway.pipeline.standing_cut``: often a word's tail,
        and the words the same), when the pause's text still goes to the session, whose reply made
        from it the finished turn adopts when its transcript is the same (jfk's "country.": ~400 ms
        sooner than the turn's own transcript), until the caller speaks again in that pause."""
        self._quiet_void = not went_on
        if went_on:
            self._speculation_voided.set()
        self.ctx.notify(SpeechResumed(self._call))

    def _ask_model(self) -> Optional[float]:
        """The semantic model's probability that the turn so far (its last 8 s) is complete; None
        when it failed (logged once; the turn then ends by silence)."""
        if self._end_of_turn is None:
            return None
        self.semantic_checks += 1
        try:
            with CORE_USE.heavy():
                return self._end_of_turn.end_of_turn_probability(np.concatenate(self._utterance[-self._model_window :]))
        except Exception:
            if not self._model_failed:
                log.exception("end-of-turn model failed; ending turns by silence")
                self._model_failed = True
            return None

    def _start_turn(self, turn: TurnDetection, received_at: float) -> None:
        if self._barge.held:
            if self._join_held():
                return
            self._release_held()
        self._speech_start = self._candidate_start
        prefix = list(self._prefix)
        self._begin_speech(prefix + self._candidate)
        event = SpeechStarted(self._call, audio_start_ms=self._ms(self._speech_start))
        language = self.ctx.settings.language
        rules = BargeInRules(
            turn.min_interruption_words, turn.max_backchannel_ms, turn.false_interruption_timeout_ms, language
        )
        if turn.interrupt_response and rules.enabled and self.ctx.pause_reply():
            self._barge.begin(self._speech_start, rules)  # words decide: see _act
            # The reply's words that may echo in the probes' audio: those played from the echo path's
            # longest delay before the probes' first sample (the turn's prefix) on.
            heard_s = len(self._utterance) * self._chunk / self._rate
            self._echo_since = received_at - heard_s - MAX_DELAY_MS / 1000
            self._probe_skip = self._echoed_prefix(prefix, turn, received_at)
            log.debug(
                "barge-in: speech at %d ms under the reply's audio; reply paused, turn held", event.audio_start_ms
            )
            self._held_start = event
            self._resume_reported = False
            return
        # The unit cancels any reply first and then reports the event: barge-in is not delayed by it.
        self.ctx.on_speech_started(event)
        if turn.drafts_while_speaking and self._drafts.allowed():
            # The first draft: nothing said yet, but the LLM may read the prompt up to the caller's words.
            self.ctx.notify(TranscriptDrafted(self._call, transcript="", speaking=True))

    def _begin_speech(self, utterance: list[np.ndarray]) -> None:
        """The caller is speaking: a turn's ``utterance`` so far; the pause state, the speculation, the
        prefix and the candidate chunks start anew (a new turn, or a part joining the held one)."""
        self._in_speech = True
        self._silence = 0
        self._reset_pause()
        self._cut.drop()
        self._quiet_void = False
        self._drafts.start()
        self._utterance = utterance
        self._prefix.clear()
        self._candidate = []

    def _is_echo(self, turn: TurnDetection, received_at: float) -> bool:
        """True when the speech about to start a turn is mostly the reply's own echo."""
        if not turn.echo_guard:
            return False
        window = int(_ECHO_WINDOW_MS * self._rate / 1000 / self._chunk)
        recent = (list(self._prefix) + self._candidate)[-window:]
        if self.ctx.echo_share(np.concatenate(recent), received_at) < turn.echo_guard_correlation:
            return False
        self.echo_rejections += 1
        for held in self._candidate:
            self._remember_prefix(held, turn)
        self._candidate = []
        return True

    def _remember_prefix(self, chunk: np.ndarray, turn: TurnDetection) -> None:
        self._prefix.append(chunk)
        keep = max(0, int(turn.prefix_padding_ms * self._rate / 1000 / self._chunk))
        while len(self._prefix) > keep:
            self._prefix.popleft()

    def _keep_uncommitted(self, chunk: np.ndarray, turn: TurnDetection) -> None:
        """Keep ``chunk`` for a client's commit: the last ``max_utterance_s`` since the last commit."""
        self._uncommitted.append(chunk)
        limit = max(1, int(turn.max_utterance_s * self._rate / self._chunk))
        while len(self._uncommitted) > limit:
            self._uncommitted.popleft()

    def _commit(self, manual: bool) -> None:
        taken = self._take_turn(manual)
        if taken is not None:
            self.ctx.notify(taken[0])
            self.emit(taken[1])

    def _take_turn(self, manual: bool) -> Optional[tuple[InputCommitted, Utterance]]:
        """End the turn: its InputCommitted and Utterance. A ``manual`` commit takes all the audio
        since the last commit (the pending part of a chunk included) and starts the VAD afresh; with
        less than ``MIN_COMMIT_MS`` of it, it is None after an InputRejected and nothing changes.
        A VAD turn's end takes the turn's audio (None when there is none)."""
        if manual:
            if self._pending.size:
                self._uncommitted.append(self._pending)
                self._pending = np.zeros(0, np.float32)
            held_ms = sum(chunk.size for chunk in self._uncommitted) * 1000 / self._rate
            if held_ms < MIN_COMMIT_MS:
                self.ctx.notify(
                    InputRejected(
                        self._call,
                        code="input_audio_buffer_commit_empty",
                        message=(
                            "Error committing input audio buffer: buffer too small. Expected at least "
                            f"{MIN_COMMIT_MS}ms of audio, but buffer only has {held_ms:.2f}ms of audio."
                        ),
                    )
                )
                return None
            self._utterance = list(self._uncommitted)
            self._candidate = []
            self._prefix.clear()
        self._uncommitted.clear()
        if not self._utterance:
            return None
        audio = np.concatenate(self._utterance)
        now = time.monotonic()
        latency = TurnLatency(speech_end=self._last_voiced_at or now, end_of_turn=now)
        speculation = self._speculation if self._cut.stands and not manual else 0
        self._utterance, self._in_speech, self._silence = [], False, 0
        self._reset_pause()
        self._cut.drop()
        self._drafts.void()  # the turn's own transcript overtakes any draft still waiting
        committed = InputCommitted(self._call, audio_ms=self._ms(len(audio)))
        return committed, Utterance(self._call, audio=audio, latency=latency, speculation=speculation)
