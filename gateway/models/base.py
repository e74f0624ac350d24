"""The interfaces the pipeline stages use; every backend implements one of them.

Weights are loaded once per process and shared by all units; anything that belongs to one caller
(VAD recurrent state, chat history) lives in the unit, never in these objects. Every method here is
called from stage threads of several units at once and must be thread-safe.

The LLM interface, for the stage and for whoever wires Realtime function calling on top of it::

    result = llm.generate(messages, max_tokens, should_stop, on_text, GenerationOptions(
        temperature=0.0,                      # None: the engine's default (config llm_temperature)
        tools=[FunctionTool("get_weather", "Current weather", {"type": "object", "properties": {...}})],
        tool_choice="auto",                   # "none" | "required" | a tool's name
    ))
    result.text, result.finish_reason        # "stop" | "length" | "budget" | "cancelled" | "tool_calls"
    result.tool_calls                         # [ToolCall(call_id="call_...", name=..., arguments='{"city": ...}')]

``messages`` carry the conversation: a ``function_call`` item becomes an assistant
``ChatMessage(tool_calls=[ToolCall(...)])``, a ``function_call_output`` item a
``ChatMessage("tool", output, tool_call_id=call_id)``. Text of a call never reaches ``on_text``;
``result.status`` maps the finish reason to a Realtime response status. Engines: llama.cpp
(``llama_cpp.llm``: arguments constrained by a grammar from the tool's JSON schema),
OpenAI-compatible HTTP (``openai_http.llm``: ``tools``/``tool_choice`` passed, streamed
``tool_calls`` joined), transformers (``transformers_llm``: parsed, not constrained).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

import numpy as np


class ModelNotFoundError(RuntimeError):
    """A model's weights are not installed; the message names what to install or pass."""


class VadStream(Protocol):
    """One caller's audio through a voice activity detector: the network's recurrent state, fed
    chunks in stream order from one thread."""

    def speech_probability(self, chunk: np.ndarray) -> float:
        """Probability 0..1 that ``chunk`` (float32, shape (512,), 16 kHz, -1..1) holds speech."""

    def reset(self) -> None:
        """Forget everything heard so far (a new call starts)."""


class VoiceActivityDetector(Protocol):
    """Loaded VAD weights, shared by all units; each caller gets its own :class:`VadStream`.

    Chunks are float32 mono of exactly ``chunk_samples`` at ``sample_rate`` Hz (Silero: 512 at
    16 kHz, 32 ms). The inbound reader resamples caller audio to ``sample_rate``, so it fixes the
    rate of the whole input path. ``new_stream`` may be called from any thread.
    """

    sample_rate: int  # Hz of the chunks it takes
    chunk_samples: int  # samples per chunk

    def new_stream(self) -> VadStream:
        """A fresh detector state that shares the loaded weights."""


class EndOfTurnModel(Protocol):
    """Semantic end-of-turn detection (Smart Turn v3.2): has the caller finished the turn, judging by
    its words and intonation rather than by silence alone? Shared by all units; thread-safe.

    Audio is float32 mono at ``sample_rate`` Hz (16 kHz, the VAD's rate), -1..1: the turn so far,
    ending with the pause heard so far.
    """

    sample_rate: int

    def end_of_turn_probability(self, audio: np.ndarray) -> float:
        """0..1: how likely the turn in ``audio`` is complete (low: the caller is mid-thought)."""


class SpeechToText(Protocol):
    """Batch transcription of one finished turn, called from STT threads of several units at once.

    Turns arrive at the VAD's rate and nothing converts them, so ``sample_rate`` (Hz) must equal the
    VAD's: 16 kHz for Silero and Whisper.
    """

    sample_rate: int

    def transcribe(self, audio: np.ndarray, language: str = "en") -> str:
        """Text of ``audio`` (float32 mono, -1..1, at ``sample_rate`` Hz); "" when nothing was said."""


@dataclass(frozen=True)
class HeardWord:
    """One word of a transcript and how sure the decoder was of it: ``probability`` 0..1, the
    geometric mean of its tokens' probabilities (1.0 when the engine does not say)."""

    text: str
    probability: float = 1.0


@dataclass(frozen=True)
class ScoredTranscript:
    """A quick transcript with its words' probabilities (``WordScoringSpeechToText``). ``trusted``
    is False when the decode looks wrong (it looped or hit its token cap): its words may still
    decide a barge-in, but its text must not stand for a finished turn."""

    text: str
    words: tuple[HeardWord, ...] = ()
    trusted: bool = True


class WordScoringSpeechToText(SpeechToText, Protocol):
    """An STT engine that also says how sure it is of each word (Whisper: the decoder's token
    probabilities), for barge-in probes: speech under the reply's audio, transcribed every ~0.2 s
    while it goes on (``gateway.pipeline.bargein``). Optional: the STT stage uses it when the engine
    has it, else the plain text with every word at probability 1.0."""

    def transcribe_words(self, audio: np.ndarray, language: str = "en") -> ScoredTranscript:
        """A fast transcript of ``audio`` (as ``transcribe`` takes it) with word probabilities; never
        the engine's slow fallback path (a probe must answer within ~0.3 s)."""


@dataclass
class ToolCall:
    """A function call the model made: ``arguments`` is JSON text (an object) valid for the tool's
    ``parameters`` schema; ``call_id`` ties the caller's ``function_call_output`` back to it."""

    call_id: str
    name: str
    arguments: str


@dataclass
class ChatMessage:
    """One prompt message in the role/content shape that chat templates take (Hugging Face
    ``apply_chat_template``, OpenAI Chat Completions); built from Realtime conversation items.

    An assistant message may carry the ``tool_calls`` it made (``content`` may then be ""); a
    ``tool`` message is the output of call ``tool_call_id`` (Realtime ``function_call_output``).
    """

    role: str  # "system" | "user" | "assistant" | "tool"
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: Optional[str] = None


@dataclass
class FunctionTool:
    """A function the model may call (Realtime ``session.tools`` entry of type ``function``).

    ``parameters`` is a JSON Schema object (``{"type": "object", "properties": {...}}``); the
    llama.cpp engine constrains the call's arguments to it with a grammar.
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


TOOL_CHOICES = ("auto", "none", "required")  # or the name of one of the request's tools


@dataclass
class GenerationOptions:
    """Per-request settings of one generation; None fields take the engine's configured default.

    ``temperature`` 0 is greedy decoding, > 0 samples (with ``top_p``, ``seed``). ``budget_s`` is
    the most wall seconds the engine may spend on the request once it holds the engine (prompt and
    decode; the queue wait is not counted): past it generation stops with ``finish_reason``
    "budget". ``tool_choice``: "auto" (the model decides), "none" (text only), "required" (one
    call of any tool), or a tool name (a call of that tool). ``min_tokens``: a reply in words may
    not end before this many tokens (the end of generation is barred until then; 0: any time),
    for the one retry of a reply that ended with no words (``gateway.pipeline.llm``).
    """

    temperature: Optional[float] = None
    top_p: Optional[float] = None
    seed: Optional[int] = None
    budget_s: Optional[float] = None
    tools: list[FunctionTool] = field(default_factory=list)
    tool_choice: str = "auto"
    min_tokens: int = 0
    # When the reply's next token is needed (monotonic s), asked before each one; None: at once.
    # The caller's pace (gateway.pipeline.pacing): an engine that batches turns serves the earliest
    # first and lets a reply far ahead of its playout wait; the time so waited is not budget.
    due: Optional[Callable[[], float]] = field(default=None, compare=False, repr=False)


FINISH_REASONS = ("stop", "length", "budget", "cancelled", "tool_calls")


@dataclass
class Generation:
    """What one ``generate`` call produced.

    ``finish_reason``: "stop" (the model ended), "length" (``max_tokens`` reached), "budget" (the
    compute budget ran out), "cancelled" (``should_stop`` said so, possibly while queued), or
    "tool_calls" (``tool_calls`` holds the calls; ``text`` is any text said before them).
    ``prompt_tokens`` is the prompt's size after fitting it into the context, ``cached_tokens`` how
    many of them were reused from the KV cache instead of evaluated; ``queue_wait_s`` the seconds
    spent waiting for the shared engine.
    """

    text: str
    tokens: int
    finish_reason: str = "stop"
    tool_calls: list[ToolCall] = field(default_factory=list)
    prompt_tokens: int = 0
    cached_tokens: int = 0
    queue_wait_s: float = 0.0

    @property
    def status(self) -> str:
        """The Realtime response status: "incomplete" when cut by ``max_tokens`` or the budget,
        "cancelled" when stopped, else "completed"."""
        if self.finish_reason in ("length", "budget"):
            return "incomplete"
        return "cancelled" if self.finish_reason == "cancelled" else "completed"


class LanguageModelError(RuntimeError):
    """A generation failed in a way the caller should hear about (an unreachable or silent LLM
    server, a prompt the engine cannot take); the LLM stage reports it as an ``error`` event."""


class PromptWarm(Protocol):
    """A session's hold on a prompt being read ahead into an engine's cache: its instructions and
    tools (an engine's optional ``prepare(messages, options)``) or a whole reply's prompt from the
    transcript so far (optional ``read_ahead(messages, max_tokens, options)``); either returns one,
    or None."""

    def cancel(self) -> None:
        """The session no longer needs it (ended, or new instructions): stop reading for it."""

    @property
    def done(self) -> bool:
        """True once it is read (or stopped)."""


class LanguageModel(Protocol):
    """Streaming chat completion for the LLM stage; ``name`` is the ``llm_model`` setting.

    One instance per process serves every unit: callers wait their turn in FIFO order
    (``gateway.models.compute.engine_queue``), so ``should_stop`` is also how a cancelled response leaves
    the queue or gives the engine back, within one token.
    """

    name: str

    def generate(
        self,
        messages: list[ChatMessage],
        max_tokens: int,
        should_stop: Callable[[], bool],
        on_text: Callable[[str], None],
        options: Optional[GenerationOptions] = None,
    ) -> Generation:
        """Generate a reply, calling ``on_text(piece)`` from the calling thread as text is decoded.

        ``should_stop`` is polled at least once per token (and while queued); when it returns True
        generation ends early with ``finish_reason`` "cancelled". Text of a tool call is never
        passed to ``on_text``. Raises LanguageModelError when the engine cannot answer.
        """


class TextToSpeech(Protocol):
    """Synthesis for the TTS stage, called from TTS threads of several units at once.

    ``sample_rate`` is the voice's own rate (Piper joe: 22050 Hz); the stage resamples to the
    48 kHz of the WebRTC track. ``voice`` is the name reported to clients as the session's voice.
    """

    sample_rate: int  # Hz of the audio it yields
    voice: str

    def synthesize(self, text: str, speed: float = 1.0, voice: Optional[str] = None) -> Iterator[np.ndarray]:
        """Yield float32 mono audio (-1..1) for ``text``, one array per sentence, as soon as each is ready.
        ``voice``: the session's voice name (``audio.output.voice``), None for the default; a backend
        with one voice ignores it."""


@dataclass
class ModelSet:
    """The models of one process, shared by every PipelineUnit."""

    vad: VoiceActivityDetector
    stt: SpeechToText
    llm: LanguageModel
    tts: TextToSpeech
    end_of_turn: Optional[EndOfTurnModel] = None  # None: turns end by silence alone (turn_detector=silence)
