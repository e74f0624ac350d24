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
4. With tools, "auto" or "required" first decide whether to call and which tool
   (:mod:`gateway.models.tool_decision`): a prompt of its own (the tools' names and descriptions,
   the caller's last message) is read on the turn's sequence and each option (``none``, each name)
   scored by its log-probability (``option_scores``); a tool named by ``tool_choice`` is called
   without deciding. After a tool output "auto" decides again (a chained call or the answer;
   bounded, see ``tool_decision``). A call is generated as a bare call object after the prompt
   listing only that tool, under the grammar of its JSON schema (``LlamaGrammar.from_json_schema``,
   ``grammar_sampler``); call text is never streamed; under "auto" a call whose every argument value
   the model made up (``tool_decision.invented``) is answered in words instead. A reply in words is
   read from a prompt that lists no tools, so it cannot recite them.

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
from dataclasses import replace
from pathlib import Path
from typing import Optional

import numpy as np

from gateway.models.base import (
    ChatMessage,
    Generation,
    GenerationOptions,
    LanguageModelError,
    ModelNotFoundError,
    PromptWarm,
    ToolCall,
)
from gateway.models.compute.core_use import LlamaThreads
from gateway.models.compute.engine_queue import EngineQueue, Turn
from gateway.models.llama_cpp.batch import BatchDecoder
from gateway.models.llama_cpp.chat_format import ChatFormat
from gateway.models.llama_cpp.gguf_bundles import BUNDLES, bundled_gguf
from gateway.models.llama_cpp.grammar_sampler import GrammarSampler, sample_token
from gateway.models.llama_cpp.holds import SequenceLease, Warm, Warms
from gateway.models.llama_cpp.option_scores import score_options, token_logprob
from gateway.models.llama_cpp.state_cache import LlamaStateCache
from gateway.models.tool_calls import (
    allowed_tools,
    call_schema,
    check_tool_choice,
    classify_start,
    complete_json,
    new_call_id,
    parse_call,
)
from gateway.models.tool_decision import (
    CALL_THRESHOLD,
    CHAIN_CALL_THRESHOLD,
    DECISION_BUDGET_SHARE,
    MAX_CHAIN_CALLS,
    Decision,
    chain_since_request,
    decide,
    decision_messages,
    decision_systems,
    invented,
    option_names,
    repeats,
    words_option,
)

log = logging.getLogger(__name__)

_INSTALL_HINT = "scripts/setup.sh builds and installs llama-cpp-python (or pip install llama-cpp-python)"
_CALL_TOKENS = 256  # a constrained call may use at least this many tokens, whatever max_tokens says


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
    ``call_threshold``: the share of probability the tools must hold for "auto" to call one (0..1).
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
        call_threshold: float = CALL_THRESHOLD,
    ) -> None:
        try:
            from llama_cpp import Llama, llama_print_system_info
        except ImportError as exc:
            raise ModelNotFoundError(f"llama-cpp-python is not installed ({exc}): {_INSTALL_HINT}") from exc
        path = resolve_gguf(model, cache_dir)
        try:  # weights, vocabulary and metadata; turns run on the BatchDecoder's own context
            self._llm = Llama(model_path=str(path), n_ctx=64, n_batch=64, n_threads=1, verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise ModelNotFoundError(f"{path} could not be loaded by llama.cpp ({exc})") from exc
        # the instruction sets of the CPU backend variant llama.cpp loaded (scripts/build_llama_wheel.sh)
        log.info("llama.cpp %s", bytes(llama_print_system_info()).decode(errors="replace").strip())
        self.name = model
        self.path = path
        self.n_ctx = n_ctx
        self.queue = EngineQueue(slots=sequences)
        self.state_cache = LlamaStateCache(state_cache_mb * 1024 * 1024)
        self.decoder = BatchDecoder(
            self._llm,
            n_ctx=kv_cells or n_ctx * min(2, max(1, (sequences + 1) // 2)),
            sequences=sequences,
            prefixes=3,  # a session's reply head, its decision's and its chained decision's (``prepare``)
            threads=threads,
            chunk=max(prefill_chunk, 8),
            shared_chunk=max(prefill_chunk // 2, 4),
            state_cache=self.state_cache,
        )
        self._defaults = GenerationOptions(temperature=temperature, top_p=top_p, budget_s=budget_s)
        self.chat = ChatFormat(self._llm, n_ctx)
        self.call_threshold = call_threshold
        self.decision_budget_share = DECISION_BUDGET_SHARE

    # ----- reading ahead -----

    def prepare(self, messages: list[ChatMessage], options: Optional[GenerationOptions] = None) -> Optional[PromptWarm]:
        """Read a session's instructions and tools into the KV cache in the background, so its first
        turn does not have to; sessions with the same ones share those cells. That is the head of
        the prompt its replies are read after (the system message with the tools ``options`` lets
        a reply list: none under "auto"), and with tools to decide among ("auto", "required") the
        heads of the call decision's prompts (the tools' listing), the first one's and the one after
        a tool's output (a chained decision). Returns at once: the session's
        hold on the reading (``cancel()`` it when the session ends or its instructions change), or
        None when nothing is read."""
        options = options or GenerationOptions()
        try:
            check_tool_choice(options.tools, options.tool_choice)
        except ValueError:
            return None
        deciding = bool(options.tools) and options.tool_choice in ("auto", "required")
        heads = (
            [] if options.tool_choice == "required" else [self.chat.prefix_tokens(messages, _reply_options(options))]
        )
        if deciding:
            systems = decision_systems(messages, options.tools)
            heads += [self.chat.prefix_tokens([system], GenerationOptions()) for system in systems]
        warms = [warm for warm in (self.decoder.warm(head) for head in heads) if warm is not None]
        return Warms(warms) if len(warms) > 1 else (warms[0] if warms else None)

    def read_ahead(
        self, messages: list[ChatMessage], max_tokens: int, options: Optional[GenerationOptions] = None
    ) -> Optional[Warm]:
        """Read the whole prompt of a reply to ``messages`` (a caller's words transcribed at a pause,
        before the turn is known to be over) in the background, in steps where no turn reads or decodes: a
        :meth:`generate` with the same arguments then reads only what differs. Nothing is generated,
        so nothing of a transcript that did not stand can be said. Under "auto" with tools that is the
        prompt of a reply in words (the call decision's own prompt is short). Returns the hold (``cancel()`` it
        when the turn went otherwise), or None when nothing is read (bad ``tool_choice``, no free
        prefix sequence)."""
        options = options or GenerationOptions()
        try:
            check_tool_choice(options.tools, options.tool_choice)
        except ValueError:
            return None
        prompt = self.chat.prompt_tokens(messages, max(1, max_tokens), _reply_options(options))
        return self.decoder.warm(prompt, limit=self.n_ctx, speculative=True)

    def decide_tool(self, messages: list[ChatMessage], options: GenerationOptions) -> Optional[Decision]:
        """The call decision a :meth:`generate` with these arguments makes first ("auto" or
        "required" with tools), without generating; None for other choices. Raises
        LanguageModelError for a bad ``tool_choice``."""
        try:
            check_tool_choice(options.tools, options.tool_choice)
        except ValueError as exc:
            raise LanguageModelError(str(exc)) from None
        if not options.tools or options.tool_choice not in ("auto", "required"):
            return None
        with self.queue.turn(lambda: False) as turn:
            assert turn is not None  # never stopped
            lease = self.decoder.lease()
            try:
                return _Run(self, turn, lease, options, lambda: False, 1).decide(
                    messages, options.tools, options.tool_choice
                )
            finally:
                lease.release()

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


def _reply_options(options: GenerationOptions) -> GenerationOptions:
    """``options`` for the prompt a reply in words is read after: under "auto" it lists no tools."""
    return replace(options, tool_choice="none") if options.tool_choice == "auto" else options


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
        share = engine.decision_budget_share  # of the budget the call decision may use
        self.decision_deadline = turn.started + share * budget if budget and budget > 0 else float("inf")
        self.should_stop = should_stop
        self.max_tokens = max(1, max_tokens)
        self.pace = requested.due
        self.paced_s = 0.0  # time a paced token was let wait before it was due (not budget)
        self.cached = 0
        self.call_probability: Optional[float] = None
        self.call_pieces: list[tuple[str, float]] = []  # the call's tokens: text, log-probability (``invented``)
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

    def evaluate_kept(self, tokens: list[int], reuse_others: bool = False) -> tuple[Optional[np.ndarray], int]:
        """The lease's evaluation of ``tokens``, due when the request's pace says (None: now);
        ``reuse_others``: a new prompt may copy a prefix from other sequences."""
        due = self.pace() if self.pace is not None else None
        started = time.monotonic()
        result = self.lease.evaluate(tokens, self.interrupted, due, reuse_others=reuse_others, due_of=self.pace)
        if due is not None and due > started:
            self.paced_s += min(time.monotonic(), due) - started
        return result

    def execute(self, messages: list[ChatMessage], on_text: Callable[[str], None]) -> Generation:
        tools = allowed_tools(self.options.tools, self.options.tool_choice)
        choice = self.options.tool_choice
        chain = chain_since_request(messages)
        if choice == "auto" and len(chain) >= MAX_CHAIN_CALLS:
            tools = []  # the chain is long enough: its outputs are answered in words
        if tools and choice in ("auto", "required"):
            decision = self.decide(messages, tools, choice)
            if decision is None and self.should_stop():
                return Generation("", 0, "cancelled")
            if decision is None and choice == "required":
                raise LanguageModelError("the call decision ran out of its compute budget: no tool could be chosen")
            if decision is None:  # its share of the budget ran out: "auto" answers in words, with the rest
                log.warning("tool decision ran out of its compute budget: answered in words")
            self.call_probability = decision.call_probability if decision else None
            tools = [t for t in tools if decision and t.name == decision.tool]
        may_call = len(chain) < MAX_CHAIN_CALLS
        if tools:
            called = self.make_call(messages, tools)
            if choice != "auto" or not called.tool_calls:
                return called
            if chain and repeats(called.tool_calls[0], chain):
                log.debug("tool call %s repeats the chain's: answered in words", called.tool_calls[0].name)
            elif not chain and invented(self.call_pieces):
                log.debug("tool call %s has only invented arguments: answered in words", called.tool_calls[0].name)
            else:
                return called
            may_call = False
        return self.words(messages, on_text, may_call)

    def make_call(self, messages: list[ChatMessage], tools: list) -> Generation:
        """The call of ``tools[0]`` (chosen): its arguments under its schema grammar, after the
        prompt that lists only it."""
        prompt = self.chat.prompt_tokens(messages, self.max_tokens, replace(self.options, tool_choice=tools[0].name))
        logits, self.cached = self.evaluate_kept(prompt, reuse_others=True)
        if logits is None:
            return Generation("", 0, self.stop_reason() or "cancelled", prompt_tokens=len(prompt))
        return self.call(prompt, logits, "", 0, tools)

    def words(self, messages: list[ChatMessage], on_text: Callable[[str], None], may_call: bool) -> Generation:
        """A reply in words, read from a prompt that lists no tools: none can be recited. A reply
        that opens a call anyway becomes one only when ``may_call`` (not past the chain's bound)."""
        choice = self.options.tool_choice
        prompt = self.chat.prompt_tokens(messages, self.max_tokens, replace(self.options, tool_choice="none"))
        logits, self.cached = self.evaluate_kept(prompt, reuse_others=True)
        if logits is None:
            return Generation("", 0, self.stop_reason() or "cancelled", prompt_tokens=len(prompt))
        names = allowed_tools(self.options.tools, choice) if may_call else []
        result = self.decode(prompt, logits, names, on_text)
        result.prompt_tokens, result.cached_tokens = len(prompt), self.cached
        return result

    def decide(self, messages: list[ChatMessage], tools: list, choice: str) -> Optional[Decision]:
        """Whether to call and which tool (:mod:`gateway.models.tool_decision`), scored on this
        turn's sequence before its prompt is read; None when stopped or past the decision's share
        of the budget (``decision_budget_share``)."""
        whole, self.deadline = self.deadline, min(self.deadline, self.decision_deadline)
        try:
            return None if self.interrupted() else self._decide(messages, tools, choice)
        finally:
            self.deadline = whole

    def _decide(self, messages: list[ChatMessage], tools: list, choice: str) -> Optional[Decision]:
        prompt = self.chat.tokenize(self.chat.render(decision_messages(messages, tools), GenerationOptions()))
        first, cached = self.evaluate_kept(prompt)
        if first is None:
            return None
        tokenize = self.llm.tokenize
        chained = bool(chain_since_request(messages))
        names = option_names(tools, choice, chained)
        replies = {name: tokenize(name.encode(), add_bos=False, special=False) for name in names}
        scores = score_options(self.evaluate, prompt, first, replies)
        if scores is None:
            return None
        threshold = CHAIN_CALL_THRESHOLD if chained else self.engine.call_threshold
        decision = decide(scores, threshold, words_option(tools, chained))
        decision.prompt_tokens, decision.cached_tokens = len(prompt), cached
        log.debug("tool decision %s (call probability %.3f)", decision.tool, decision.call_probability)
        return decision

    def decode(self, prompt: list[int], logits: np.ndarray, tools: list, on_text: Callable[[str], None]) -> Generation:
        """Stream a reply in words after ``prompt`` (``logits``: those of its last token). With
        ``tools`` (the prompt lists none of them), the first token may not open a call, and a reply
        that still starts as one (``<tool_call>``, a fence, ``{``, ``name(``) is made the call it
        is (:meth:`call`) rather than said. Before ``min_tokens`` tokens no end-of-generation token
        is taken: each one chosen is barred and the choice made again."""
        chat = self.chat
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        deciding = bool(tools)  # hold text back until it is clear whether a call opens
        names, first_logits = tuple(t.name for t in tools), logits
        held, text = "", ""
        accepted: list[int] = []  # tokens of the text reply
        finish = "stop"
        while True:
            if tools and not accepted:
                logits = logits.copy()
                logits[chat.openers()] = -np.inf
            token = sample_token(logits, self.temperature, self.rng, top_p=self.top_p)
            while chat.is_eog(token) and len(accepted) < self.options.min_tokens:
                logits = logits.copy()  # the end is barred until min_tokens: the next choice instead
                logits[token] = -np.inf
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
        self.call_pieces = []
        try:
            while True:
                token = sampler.pick(logits, self.temperature, self.rng)
                if chat.is_eog(token):
                    finish = "stop"
                    break
                sampler.accept(token)
                piece = decoder.decode(self.llm.detokenize([token]))
                body += piece
                self.call_pieces.append((piece, token_logprob(logits, token)))
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
