"""Chat LLM in process on llama.cpp (``llama-cpp-python``), from a GGUF file: the default engine.

The default model is Qwen2.5-Coder-1.5B-Instruct Q4_K_M, joined once from its packages (see
``gateway.models.llama_cpp.gguf_bundles``); ``qwen2.5-coder-0.5b``, ``smollm2-135m`` or any ``.gguf`` path
may be configured instead. One instance per process serves every unit: up to ``sequences`` turns
run at once on one context (continuous batching, ``gateway.models.llama_cpp.batch``: one decode step
advances every active turn, new turns join at the next step); more wait in an
:class:`~gateway.models.compute.engine_queue.EngineQueue` in arrival order.

One generation, on its leased KV sequence:

1. The prompt is rendered with the model's own chat template (GGUF ``tokenizer.chat_template``;
   tools are listed through it when it supports them) and fitted into ``n_ctx`` by dropping the
   oldest turns (:class:`~gateway.models.llama_cpp.chat_format.ChatFormat`, ``prompt_fit``).
2. The longest prefix already held is kept: the sequence's own cells, another sequence's (a
   session's instructions and tools read by :meth:`LlamaCppLanguageModel.prepare`, the prompt
   read ahead from the transcript at the caller's pause by :meth:`LlamaCppLanguageModel.read_ahead`,
   or another caller with the same ones: copied cell references, no compute), or a saved state of this
   conversation (``gateway.models.llama_cpp.state_cache``). The rest is read in chunks between other
   turns' decode steps; ``should_stop`` and the compute budget are checked at every step.
3. Tokens are chosen one at a time in the caller's thread (greedy at temperature 0, else sampled
   with the request's seed); ``should_stop`` and the budget are checked after every token and
   while waiting for a step, so a cancel stops the turn within one token.
4. With tools (``tool_choice`` not "none"): when the model gives ``CALL_THRESHOLD`` of probability
   to opening a call (``<tool_call>``, a code fence or ``{``) as its first token, or its reply
   starts so (or as code: ``get_weather(``), a bare call object is generated after the prompt under
   a grammar of the tools' JSON schemas (``LlamaGrammar.from_json_schema``, ``grammar_sampler``);
   "required" or a tool name go to it at once. Call text is never streamed.

Threads, per step (``threads``, :class:`~gateway.models.compute.core_use.LlamaThreads`): ``idle`` (2) for a
lone call while no STT, TTS or end-of-turn call runs, else 1 (measured on a 2-core box: 2 decode threads give
~34 tokens/s idle but ~5 when the other core is busy; 1 thread holds ~21-23 idle and 8-21 busy).
Memory: the 1.5B instance adds ~1.8 GB RSS: 1.1 GB of memory-mapped weights, ~28 KiB of
KV cache per cell (``kv_cells``, by default ``n_ctx`` per two sequences up to ``2 * n_ctx``, shared by all sequences)
and compute buffers; plus the saved states (``state_cache_mb``).
"""

from __future__ import annotations

import codecs
import json
import logging
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import numpy as np

from gateway.models.base import (
    ChatMessage,
    Generation,
    GenerationOptions,
    LanguageModelError,
    ModelNotFoundError,
    ToolCall,
)
from gateway.models.compute.core_use import LlamaThreads
from gateway.models.compute.engine_queue import EngineQueue, Turn
from gateway.models.llama_cpp.batch import BatchDecoder
from gateway.models.llama_cpp.chat_format import ChatFormat
from gateway.models.llama_cpp.gguf_bundles import BUNDLES, bundled_gguf
from gateway.models.llama_cpp.grammar_sampler import GrammarSampler, sample_token
from gateway.models.llama_cpp.holds import SequenceLease, Warm
from gateway.models.llama_cpp.state_cache import LlamaStateCache
from gateway.models.tool_calls import (
    allowed_tools,
    answered_already,
    call_schema,
    check_tool_choice,
    classify_start,
    complete_json,
    new_call_id,
    parse_call,
)

log = logging.getLogger(__name__)

_INSTALL_HINT = "scripts/setup.sh builds and installs llama-cpp-python (or pip install llama-cpp-python)"
_CALL_TOKENS = 256  # a constrained call may use at least this many tokens, whatever max_tokens says
# With tools and tool_choice "auto": a call is made when the model gives at least this probability
# to opening one (``<tool_call>``, a code fence or ``{``) as its first token.
CALL_THRESHOLD = 0.35


def resolve_gguf(model: str, cache_dir: Path) -> Path:
    """The GGUF file for the ``llm_model`` setting: a bundled name (joined once) or a ``.gguf`` path."""
    if model in BUNDLES:
        return bundled_gguf(model, cache_dir)
    path = Path(model).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ModelNotFoundError(f"GGUF file {path} does not exist")
        return path
    raise ModelNotFoundError(
        f"llm_backend llama_cpp takes a bundled model ({', '.join(BUNDLES)}) or a .gguf file, not {model!r}"
    )


class LlamaCppLanguageModel:
    """Streaming chat generation on llama.cpp, shared by all units (``sequences`` turns at a time).

    Raises ModelNotFoundError at construction when llama-cpp-python or the weights are missing.
    ``temperature``/``top_p``/``budget_s`` are the defaults for requests that do not set them.
    """

    def __init__(
        self,
        model: str,
        cache_dir: Path,
        threads: Optional[LlamaThreads] = None,
        n_ctx: int = 4096,
        temperature: float = 0.0,
        top_p: float = 0.95,
        budget_s: float = 30.0,
        state_cache_mb: int = 128,
        prefill_chunk: int = 32,
        sequences: int = 4,
        kv_cells: int = 0,
    ) -> None:
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ModelNotFoundError(f"llama-cpp-python is not installed ({exc}): {_INSTALL_HINT}") from exc
        path = resolve_gguf(model, cache_dir)
        try:  # weights, vocabulary and metadata; turns run on the BatchDecoder's own context
            self._llm = Llama(model_path=str(path), n_ctx=64, n_batch=64, n_threads=1, verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise ModelNotFoundError(f"{path} could not be loaded by llama.cpp ({exc})") from exc
        self.name = model
        self.path = path
        self.n_ctx = n_ctx
        self.queue = EngineQueue(slots=sequences)
        self.state_cache = LlamaStateCache(state_cache_mb * 1024 * 1024)
        self.decoder = BatchDecoder(
            self._llm,
            n_ctx=kv_cells or n_ctx * min(2, max(1, (sequences + 1) // 2)),
            sequences=sequences,
            threads=threads,
            chunk=max(prefill_chunk, 8),
            shared_chunk=max(prefill_chunk // 2, 4),
            state_cache=self.state_cache,
        )
        self._defaults = GenerationOptions(temperature=temperature, top_p=top_p, budget_s=budget_s)
        self.chat = ChatFormat(self._llm, n_ctx)

    # ----- reading ahead -----

    def prepare(self, messages: list[ChatMessage], options: Optional[GenerationOptions] = None) -> Optional[Warm]:
        """Read a session's instructions and tools (the system message of ``messages``, the tools
        of ``options``) into the KV cache in the background, so its first turn does not have to;
        sessions with the same ones share those cells. Returns at once: the session's hold on the
        reading (``cancel()`` it when the session ends or its instructions change), or None when
        nothing is read."""
        options = options or GenerationOptions()
        try:
            check_tool_choice(options.tools, options.tool_choice)
        except ValueError:
            return None
        return self.decoder.warm(self.chat.prefix_tokens(messages, options))

    def read_ahead(
        self, messages: list[ChatMessage], max_tokens: int, options: Optional[GenerationOptions] = None
    ) -> Optional[Warm]:
        """Read the whole prompt of a reply to ``messages`` (a caller's words transcribed at a pause,
        before the turn is known to be over) in the background, in steps where no turn reads or decodes: a
        :meth:`generate` with the same arguments then reads only what differs. Nothing is generated,
        so nothing of a transcript that did not stand can be said. Returns the hold (``cancel()`` it
        when the turn went otherwise), or None when nothing is read (bad ``tool_choice``, no free
        prefix sequence)."""
        options = options or GenerationOptions()
        try:
            check_tool_choice(options.tools, options.tool_choice)
        except ValueError:
            return None
        prompt = self.chat.prompt_tokens(messages, max(1, max_tokens), options)
        return self.decoder.warm(prompt, limit=self.n_ctx, speculative=True)

    # ----- generation -----

    def generate(
        self,
        messages: list[ChatMessage],
        max_tokens: int,
        should_stop: Callable[[], bool],
        on_text: Callable[[str], None],
        options: Optional[GenerationOptions] = None,
    ) -> Generation:
        """Reply to ``messages``; see the module docstring for the steps. Text pieces go to
        ``on_text`` from this thread as they are decoded. Raises LanguageModelError for a bad
        ``tool_choice`` or a failed llama.cpp step."""
        options = options or GenerationOptions()
        try:
            check_tool_choice(options.tools, options.tool_choice)
        except ValueError as exc:
            raise LanguageModelError(str(exc)) from None
        with self.queue.turn(should_stop) as turn:
            if turn is None:
                return Generation("", 0, "cancelled")
            lease = self.decoder.lease()
            try:
                result = _Run(self, turn, lease, options, should_stop, max_tokens).execute(messages, on_text)
            finally:
                lease.release()
            result.queue_wait_s = turn.waited_s
            return result


class _Run:
    """One generation on its leased KV sequence: prompt, decode, maybe a constrained call."""

    def __init__(
        self,
        engine: LlamaCppLanguageModel,
        turn: Turn,
        lease: SequenceLease,
        requested: GenerationOptions,
        should_stop: Callable[[], bool],
        max_tokens: int,
    ) -> None:
        defaults = engine._defaults
        self.engine = engine
        self.chat = engine.chat
        self.llm = engine._llm
        self.lease = lease
        self.options = requested
        self.temperature = requested.temperature if requested.temperature is not None else defaults.temperature or 0.0
        self.top_p = requested.top_p if requested.top_p is not None else defaults.top_p or 0.95
        budget = requested.budget_s if requested.budget_s is not None else defaults.budget_s
        self.deadline = turn.started + budget if budget and budget > 0 else float("inf")
        self.should_stop = should_stop
        self.max_tokens = max(1, max_tokens)
        self.pace = requested.due
        self.paced_s = 0.0  # time a paced token was let wait before it was due (not budget)
        self.cached = 0
        self.call_probability: Optional[float] = None
        seed = requested.seed if requested.seed is not None else random.randrange(2**31)
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def over_budget(self) -> bool:
        return time.monotonic() - self.paced_s > self.deadline

    def interrupted(self) -> bool:
        """``should_stop`` or the budget: polled while the sequence waits for its step."""
        return self.should_stop() or self.over_budget()

    def stop_reason(self) -> Optional[str]:
        if self.should_stop():
            return "cancelled"
        return "budget" if self.over_budget() else None

    def evaluate(self, tokens: list[int]) -> Optional[np.ndarray]:
        return self.evaluate_kept(tokens)[0]

    def evaluate_kept(self, tokens: list[int]) -> tuple[Optional[np.ndarray], int]:
        """The lease's evaluation of ``tokens``, due when the request's pace says (None: now)."""
        due = self.pace() if self.pace is not None else None
        started = time.monotonic()
        result = self.lease.evaluate(tokens, self.interrupted, due)
        if due is not None and due > started:
            self.paced_s += min(time.monotonic(), due) - started
        return result

    def execute(self, messages: list[ChatMessage], on_text: Callable[[str], None]) -> Generation:
        prompt = self.chat.prompt_tokens(messages, self.max_tokens, self.options)
        tools = allowed_tools(self.options.tools, self.options.tool_choice)
        logits, self.cached = self.evaluate_kept(prompt)
        if logits is None:
            return Generation("", 0, self.stop_reason() or "cancelled", prompt_tokens=len(prompt))
        if tools and self.options.tool_choice != "auto":
            return self.call(prompt, logits, "", 0, tools)
        result = self.decode(prompt, logits, tools, on_text)
        if result.tool_calls and all(answered_already(messages, call) for call in result.tool_calls):
            # Small models ask again for what the last tool output already told them (a loop no
            # client can break): answer in words from that output instead.
            log.info("tool call %s repeats an answered call: answering in words", result.tool_calls[0].name)
            logits = self.evaluate(prompt)
            if logits is None:
                return Generation("", 0, self.stop_reason() or "cancelled", prompt_tokens=len(prompt))
            result = self.decode(prompt, logits, [], on_text, words_only=True)
        result.prompt_tokens, result.cached_tokens = len(prompt), self.cached
        return result

    def decode(
        self,
        prompt: list[int],
        logits: np.ndarray,
        tools: list,
        on_text: Callable[[str], None],
        words_only: bool = False,
    ) -> Generation:
        """Stream a reply after ``prompt`` (``logits``: those of its last token); with ``tools``,
        switch to :meth:`call` when one opens. ``words_only``: the first token may not open a call
        (the prompt still lists the tools)."""
        chat = self.chat
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        deciding = bool(tools)  # hold text back until it is clear whether a call opens
        names, first_logits = tuple(t.name for t in tools), logits
        held, text = "", ""
        accepted: list[int] = []  # tokens of the text reply
        finish = "stop"
        while True:
            if words_only and not accepted:
                logits = logits.copy()
                logits[chat.openers()] = -np.inf
            if deciding and not accepted:
                # The model's own odds of opening a call at the first position decide, not the
                # one token sampled there (greedy argmax flips on near ties).
                self.call_probability = chat.call_probability(logits)
                log.debug("tool call probability %.3f", self.call_probability)
                if self.call_probability >= CALL_THRESHOLD:
                    return self.call(prompt, logits, text, 0, tools)
            token = sample_token(logits, self.temperature, self.rng, top_p=self.top_p)
            if chat.is_eog(token):
                break
            if tools and token == chat.call_token:
                return self.call(prompt + accepted, logits, text, len(accepted), tools)
            piece = decoder.decode(self.llm.detokenize([token]))
            if deciding:
                held += piece
                opens = classify_start(held, names)
                if opens:  # nothing was said yet: the call follows the prompt itself
                    return self.call(prompt, first_logits, "", 0, tools)
                if opens is False:
                    deciding, piece, held = False, held, ""
            accepted.append(token)
            if piece and not deciding:
                text += piece
                on_text(piece)
            if len(accepted) >= self.max_tokens or len(prompt) + len(accepted) >= chat.n_ctx - 1:
                finish = "length"
                break
            stopped = self.stop_reason()
            if stopped:
                finish = stopped
                break
            next_logits = self.evaluate(prompt + accepted)
            if next_logits is None:
                finish = self.stop_reason() or "cancelled"
                break
            logits = next_logits
        tail = decoder.decode(b"", final=True) + held
        if tail and finish != "cancelled":
            text += tail
            on_text(tail)
        return Generation(text, len(accepted), finish)

    def call(self, tokens: list[int], logits: np.ndarray, text: str, spent: int, tools: list) -> Generation:
        """Generate one call under the tools' grammar right after ``tokens`` (``logits``: those of
        its last token).

        The call object is generated bare, without a ``<tool_call>`` opener: models not trained on
        that tag (Qwen2.5-Coder) predict the end of text after it, while every model given tools
        opens a bare call with ``{"`` readily; the grammar then holds it to the schema."""
        chat = self.chat
        sampler = GrammarSampler(self.llm, chat.grammar(call_schema(tools)))
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        body, count, finish = "", 0, "length"
        cap = max(_CALL_TOKENS, self.max_tokens - spent)
        generated = list(tokens)
        try:
            while True:
                token = sampler.pick(logits, self.temperature, self.rng)
                if chat.is_eog(token):
                    finish = "stop"
                    break
                sampler.accept(token)
                body += decoder.decode(self.llm.detokenize([token]))
                count += 1
                generated.append(token)
                if body.rstrip().endswith("}") and complete_json(body):
                    finish = "stop"
                    break
                stopped = self.stop_reason()
                if stopped:
                    finish = stopped
                    break
                if count >= cap or len(generated) >= chat.n_ctx - 1:
                    break
                next_logits = self.evaluate(generated)
                if next_logits is None:
                    finish = self.stop_reason() or "cancelled"
                    break
                logits = next_logits
        except ValueError as exc:
            raise LanguageModelError(f"tool call grammar: {exc}") from None
        finally:
            sampler.close()
        used, prompt_len = spent + count, len(tokens) - spent
        if finish != "stop":
            return Generation(text, used, finish, prompt_tokens=prompt_len, cached_tokens=self.cached)
        try:
            name, arguments = parse_call(body)
        except ValueError as exc:
            raise LanguageModelError(f"the model produced no valid tool call: {exc}") from None
        call = ToolCall(new_call_id(), name, json.dumps(arguments, ensure_ascii=False))
        return Generation(text, used, "tool_calls", [call], prompt_tokens=prompt_len, cached_tokens=self.cached)
