"""Test doubles (never used by the product): language models that block, fail, wait or call a tool, a slow STT, TTS
and playout doubles, VAD/STT doubles with a hand-driven VAD -> STT chain, the pipeline control a
RealtimeSession drives, a manual clock for its timers, and a file whose disk fills up once."""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, Optional

import numpy as np

from gateway.config import GatewayConfig
from gateway.models.base import (
    ChatMessage,
    FunctionTool,
    Generation,
    GenerationOptions,
    HeardWord,
    LanguageModel,
    ScoredTranscript,
    SpeechToText,
    ToolCall,
)
from gateway.pipeline import events as pe
from gateway.pipeline.call_settings import CallSettings
from gateway.pipeline.events import PipelineEvent, TranscriptionCompleted
from gateway.pipeline.latency import TurnLatency
from gateway.pipeline.messages import AudioIn, BargeInHeard, Message, Utterance
from gateway.pipeline.queues import StageQueue
from gateway.pipeline.stt import SttStage
from gateway.pipeline.turn import TurnDetection
from gateway.pipeline.vad import VadStage


class BlockingLanguageModelDouble:
    """Blocks inside ``generate`` until ``release`` is set, ignoring cancellation (a hung model)."""

    name = "blocking-double"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def generate(
        self,
        messages: list[ChatMessage],
        max_tokens: int,
        should_stop: Callable[[], bool],
        on_text: Callable[[str], None],
        options: Optional[GenerationOptions] = None,
    ) -> Generation:
        self.entered.set()
        self.release.wait()
        on_text("Late words of a hung model. ")
        return Generation("Late words of a hung model.", 6)


class FailingOnceLanguageModelDouble:
    """Raises on the first ``generate``, then delegates to a real model."""

    def __init__(self, real: LanguageModel) -> None:
        self.real = real
        self.name = real.name
        self.failures = 0

    def generate(self, messages, max_tokens, should_stop, on_text, options=None):
        if self.failures == 0:
            self.failures += 1
            raise RuntimeError("simulated model failure")
        return self.real.generate(messages, max_tokens, should_stop, on_text, options)


class SlowLanguageModelDouble:
    """Waits ``delay_s`` (or until cancelled) before each ``generate`` of a real model: a turn
    whose first audio is late, deterministically (a busy shared engine)."""

    def __init__(self, real: LanguageModel, delay_s: float) -> None:
        self.real = real
        self.name = real.name
        self.delay_s = delay_s

    def generate(self, messages, max_tokens, should_stop, on_text, options=None):
        deadline = time.monotonic() + self.delay_s
        while time.monotonic() < deadline and not should_stop():
            time.sleep(0.02)
        if should_stop():
            return Generation("", 0, "cancelled")
        return self.real.generate(messages, max_tokens, should_stop, on_text, options)


class ToolCallingLanguageModelDouble(SlowLanguageModelDouble):
    """Answers a prompt offering tools whose last message is not a tool's output with a call of the
    first tool (``arguments``), after ``delay_s``; otherwise the real model answers (after it too)."""

    def __init__(self, real: LanguageModel, delay_s: float, arguments: str = "{}") -> None:
        super().__init__(real, delay_s)
        self.arguments = arguments
        self.calls = 0

    def generate(self, messages, max_tokens, should_stop, on_text, options=None):
        if options is None or not options.tools or messages[-1].role == "tool":
            return super().generate(messages, max_tokens, should_stop, on_text, options)
        deadline = time.monotonic() + self.delay_s
        while time.monotonic() < deadline and not should_stop():
            time.sleep(0.02)
        self.calls += 1
        call = ToolCall(f"call_double_{self.calls}", options.tools[0].name, self.arguments)
        return Generation("", 1, "tool_calls", tool_calls=[call])


class PipelineControlDouble:
    """Test double of ``PipelineControl`` (what PipelineUnit offers the protocol layer).

    Holds the call's ``settings`` (the configured defaults, as a unit's after its claim;
    ``apply_settings`` replaces them and records the prompt it would read ahead in ``prepared``),
    records every call in ``calls``, every response request in ``requests`` and every
    ``keep_alive`` in ``touches``; ``interrupt()`` reports the queued or playing reply audio that
    ``play()`` set up, as the unit's playout would.
    """

    def __init__(self, config: Optional[GatewayConfig] = None, call_id: str = "call-under-test") -> None:
        self.call_id = call_id
        self.settings = CallSettings.defaults(config or GatewayConfig())
        self.calls: list[str] = []
        self.requests: list[tuple[list[ChatMessage], bool, int]] = []  # (messages, audio, max_tokens)
        self.tool_requests: list[tuple[list[FunctionTool], str]] = []  # (tools, tool_choice) of each request
        self.generation = 0
        self.live = False
        self.audio: Optional[tuple[int, int, str]] = None  # (generation, played_ms, heard text)
        self.touches = 0
        self.prepared: list[tuple[str, list, str]] = []  # (instructions, tools, tool_choice) of each apply
        self.read_aheads: list[tuple[list[ChatMessage], Optional[int], list, str]] = []

    def current_settings(self) -> CallSettings:
        return self.settings

    def apply_settings(self, settings: CallSettings) -> None:
        self.settings = settings
        self.prepared.append((settings.instructions, list(settings.tools), settings.tool_choice))

    def read_ahead(
        self, messages: list[ChatMessage], *, max_tokens, tools: list, tool_choice: str, audio: bool = True
    ) -> None:
        self.read_aheads.append((list(messages), max_tokens, list(tools), tool_choice))

    def keep_alive(self) -> None:
        self.touches += 1

    def commit_input(self) -> None:
        self.calls.append("commit_input")

    def clear_input(self) -> None:
        self.calls.append("clear_input")

    def create_response(
        self,
        messages: list[ChatMessage],
        audio: bool = True,
        *,
        max_tokens: Optional[int] = None,
        latency: Optional[TurnLatency] = None,
        tools: Optional[list[FunctionTool]] = None,
        tool_choice: str = "auto",
    ) -> int:
        self.calls.append("create_response")
        self.tool_requests.append((list(tools or []), tool_choice))
        self.generation += 1
        self.live = True
        self.audio = None  # a new generation makes older queued audio stale
        self.requests.append((messages, audio, self.settings.max_tokens if max_tokens is None else max_tokens))
        return self.generation

    def interrupt(self) -> Optional[pe.Interruption]:
        self.calls.append("interrupt")
        was_live, audio = self.live, self.audio
        self.live, self.audio = False, None
        if audio is not None:
            return pe.Interruption(audio[0], audio_cleared=True, played_ms=audio[1], heard_text=audio[2])
        return pe.Interruption(self.generation, audio_cleared=False) if was_live else None

    def play(self, played_ms: int, heard: str) -> None:
        """The current generation's audio is queued/playing (what the caller heard so far)."""
        self.audio = (self.generation, played_ms, heard)


class TimersDouble:
    """A manual clock and ``call_later`` (the idle timeout's), advanced by the test."""

    def __init__(self) -> None:
        self.now = 100.0
        self.pending: list[list] = []  # [due, callback, cancelled]

    def clock(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> Any:
        entry = [self.now + delay, callback, False]
        self.pending.append(entry)

        class Handle:
            def cancel(self_inner) -> None:
                entry[2] = True

        return Handle()

    def advance(self, seconds: float) -> None:
        """Move the clock on and run what fell due, in order."""
        target = self.now + seconds
        while True:
            due = sorted((e for e in self.pending if not e[2] and e[0] <= target), key=lambda e: e[0])
            if not due:
                break
            entry = due[0]
            entry[2] = True
            self.now = entry[0]
            entry[1]()
        self.now = target

    @property
    def armed(self) -> int:
        return sum(1 for e in self.pending if not e[2])


class SlowSpeechToTextDouble:
    """The real speech-to-text, ``delay_s`` slower per turn (as on a loaded machine)."""

    def __init__(self, real: SpeechToText, delay_s: float) -> None:
        self.real = real
        self.delay_s = delay_s
        self.sample_rate = real.sample_rate

    def transcribe(self, audio: np.ndarray, language: str = "en") -> str:
        time.sleep(self.delay_s)  # on the STT stage thread, as a slow transcription would block it
        return self.real.transcribe(audio, language)


class TextToSpeechDouble:
    """A TTS that records each call and returns 100 ms of silence at 24 kHz."""

    sample_rate = 24000
    voice = "af_heart"

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, Optional[str]]] = []

    def synthesize(self, text: str, speed: float = 1.0, voice: Optional[str] = None) -> Iterator[np.ndarray]:
        self.calls.append((text, speed, voice))
        yield np.zeros(2400, np.float32)


class PlayoutDouble:
    """A playout buffer that records the length of what the TTS stage writes."""

    def __init__(self) -> None:
        self.written: list[int] = []

    @property
    def buffered_ms(self) -> float:
        """Audio queued and not yet played, ms: none (the double plays what it gets at once)."""
        return 0.0

    def write(self, generation: int, samples: np.ndarray, text: str) -> bool:
        self.written.append(len(samples))
        return True


class TtsContextDouble:
    """The unit as the TTS stage sees it: every generation current, events recorded."""

    call_id: Optional[str] = "rtc_test"

    def __init__(self) -> None:
        self.playout = PlayoutDouble()
        self.events: list[object] = []

    def is_current(self, generation: int) -> bool:
        return True

    def notify(self, event: object) -> None:
        self.events.append(event)


# ---- VAD / STT doubles and a hand-driven VAD -> STT chain (pipeline tests; no stage threads)
RATE = 16000
CALL = "call-1"
NUMBERS = ["one", "two", "three", "four", "five"]


class VadStreamDouble:
    """Speech wherever a 32 ms chunk is louder than -40 dBFS (a clean-signal VAD)."""

    def speech_probability(self, chunk: np.ndarray) -> float:
        return 1.0 if float(np.sqrt(np.mean(chunk**2))) > 0.01 else 0.0

    def reset(self) -> None:
        pass


class GradedVadStreamDouble(VadStreamDouble):
    """Speech (1.0) above -40 dBFS, a quiet end of a word (0.2) between -60 and -40 dBFS, else 0."""

    def speech_probability(self, chunk: np.ndarray) -> float:
        level = float(np.sqrt(np.mean(chunk**2)))
        return 1.0 if level > 0.01 else 0.2 if level > 0.001 else 0.0


class VadDouble:
    """Hands out a :class:`VadStreamDouble` (or ``stream_type``) per call; 512-sample chunks at 16 kHz."""

    sample_rate = RATE
    chunk_samples = 512

    def __init__(self, stream_type: type[VadStreamDouble] = VadStreamDouble) -> None:
        self.stream_type = stream_type

    def new_stream(self) -> VadStreamDouble:
        return self.stream_type()


class EndOfTurnDouble:
    """Answers ``probability`` for every pause; records the audio it was asked about."""

    sample_rate = RATE

    def __init__(self, probability: float) -> None:
        self.probability = probability
        self.asked: list[int] = []

    def end_of_turn_probability(self, audio: np.ndarray) -> float:
        self.asked.append(audio.size)
        return self.probability


class ScriptedSttDouble:
    """Answers ``text`` for any audio; records how many samples it was given."""

    sample_rate = RATE

    def __init__(self, text: str) -> None:
        self.text = text
        self.calls: list[int] = []

    def transcribe(self, audio: np.ndarray, language: str = "en") -> str:
        self.calls.append(audio.size)
        return self.text


class UntrustedSttDouble(ScriptedSttDouble):
    """A word-scoring engine whose quick decode of any audio is ``text``, every word sure, and marked
    untrusted (as Whisper marks a decode that looped); its full transcript is ``text`` too."""

    def transcribe_words(self, audio: np.ndarray, language: str = "en") -> ScoredTranscript:
        self.calls.append(audio.size)
        return ScoredTranscript(self.text, tuple(HeardWord(word) for word in self.text.split()), trusted=False)


class SttDouble:
    """Names the voiced segments of the audio it is given, in order: two segments -> "one two"."""

    sample_rate = RATE

    def __init__(self) -> None:
        self.calls: list[str] = []

    def transcribe(self, audio: np.ndarray, language: str = "en") -> str:
        chunks = audio[: audio.size // 512 * 512].reshape(-1, 512)
        loud = np.sqrt(np.mean(chunks**2, axis=1)) > 0.01
        segments = int(np.count_nonzero(loud[1:] & ~loud[:-1]) + (1 if loud.size and loud[0] else 0))
        text = " ".join(NUMBERS[:segments])
        self.calls.append(text)
        return text


@dataclass
class ContextDouble:
    """The StageContext a unit gives its stages: the call's settings and an event list."""

    settings: CallSettings = field(default_factory=CallSettings)
    call_id: Optional[str] = CALL
    events: list[PipelineEvent] = field(default_factory=list)

    def is_current(self, generation: int) -> bool:
        return True

    def notify(self, event: PipelineEvent) -> None:
        self.events.append(event)

    def on_speech_started(self, event: PipelineEvent) -> None:
        self.events.append(event)

    # barge-in hooks: ``playing`` says whether reply audio plays; ``echo`` is every echo_share answer
    playing: bool = False
    paused: bool = False
    echo: float = 0.0
    heard: list[BargeInHeard] = field(default_factory=list)

    def pause_reply(self) -> bool:
        self.paused = self.playing
        return self.playing

    def resume_reply(self) -> None:
        self.paused = False

    def barge_in_heard(self, call_id: str, speculation: int, heard: ScoredTranscript) -> None:
        self.heard.append(
            BargeInHeard(
                call_id, speculation=speculation, transcript=heard.text, words=heard.words, trusted=heard.trusted
            )
        )

    def echo_share(self, audio: np.ndarray, end_time: float) -> float:
        return self.echo

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]


class Chain:
    """VAD -> STT run in the test's thread: each audio frame is handled, then whatever the VAD sent on.

    ``vad``, ``end_of_turn`` and ``stt`` are models (doubles by default; real ones work the same).
    """

    def __init__(self, turn: TurnDetection, end_of_turn: Any, vad: Any = None, stt: Any = None) -> None:
        self.ctx = ContextDouble(settings=CallSettings(turn=turn))
        self.stt_in = StageQueue()
        self.stt_model = stt if stt is not None else SttDouble()
        self.vad = VadStage(self.ctx, StageQueue(), self.stt_in, vad if vad is not None else VadDouble(), end_of_turn)
        self.stt = SttStage(self.ctx, self.stt_in, None, self.stt_model)
        self.sent: list[Utterance] = []
        self.clock = 0.0

    def play(self, audio: np.ndarray) -> None:
        """Feed float audio in 20 ms frames, as the inbound reader does; arrival times advance 20 ms a frame."""
        samples = (np.clip(audio, -1, 1) * 32767).astype(np.int16)
        for start in range(0, samples.size, 320):
            self.clock += 0.02
            self.handle_vad(AudioIn(CALL, samples=samples[start : start + 320], received_at=self.clock))

    def handle_vad(self, message: Message) -> None:
        self.vad.handle(message)
        while (queued := self.stt_in.get(timeout=0)) is not None:
            assert isinstance(queued, Utterance)
            self.sent.append(queued)
            self.stt.handle(queued)
            while self.ctx.heard:  # a barge-in probe's text goes back to the VAD, as the unit routes it
                self.vad.handle(self.ctx.heard.pop(0))

    def transcripts(self) -> list[str]:
        return [e.transcript for e in self.ctx.of(TranscriptionCompleted)]


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


class SettlingPoolDouble:
    """The ``GET /v1/pool`` of a gateway whose admission is busy for its first ``busy_polls``
    answers (the load of an earlier phase still in its window), then admits: :meth:`handle` is
    the aiohttp handler; it counts the ``polls``."""

    def __init__(self, busy_polls: int) -> None:
        self.busy_polls = busy_polls
        self.polls = 0

    async def handle(self, request: Any) -> Any:
        from aiohttp import web

        self.polls += 1
        busy = self.polls <= self.busy_polls
        return web.json_response({"capacity": {"busy": busy, "reason": "answers start late" if busy else None}})
