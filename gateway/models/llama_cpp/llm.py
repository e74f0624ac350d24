"""Chat LLM in process on llama.cpp (``llama-cpp-python``), from a GGUF file: the default engine.

The default model is Qwen2.5-Coder-1.5B-Instruct Q4_K_M, joined once from its packages (see
``gateway.models.llama_cpp.gguf_bundles``); ``qwen2.5-coder-0.5b``, ``smollm2-135m`` or any ``.gguf`` path
may be configured instead. One instance per process serves every unit: up to ``sequences`` turns
run at once on one context (continuous batching, ``gateway.models.llama_cpp.batch``: one decode step
advances every active turn, new turns join at the next step); more wait in an
:class:`~gateway.models.compute.engine_queue.EngineQueue` in arrival order.

One generation, on its leased KV sequence (:class:`~gateway.models.llama_cpp.generation_run.GenerationRun`):

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
   the model made up (``tool_decision.invented``), or (``tool_decision.HEARD_CHECK``) with a value
   whose words nobody said (``heard_values.unheard``), is answered in words instead. A reply in words is
   read from a prompt that lists no tools, so it cannot recite them.

Threads, per step (``threads``, :class:`~gateway.models.compute.core_use.LlamaThreads`): ``idle`` (2) for a
lone call while no STT, TTS or end-of-turn call runs, else 1 (measured on a 2-core box: 2 decode threads give
~34 tokens/s idle but ~5 when the other core is busy; 1 thread holds ~21-23 idle and 8-21 busy).
Memory: the 1.5B instance adds ~1.8 GB RSS: 1.1 GB of memory-mapped weights, ~28 KiB of
KV cache per cell (``kv_cells``, by default ``n_ctx`` per two sequences up to ``2 * n_ctx``, shared by all sequences)
and compute buffers; plus the saved states (``state_cache_mb``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Optional

from gateway.models.base import (
    ChatMessage,
    Generation,
    GenerationOptions,
    LanguageModelError,
    ModelNotFoundError,
    PromptWarm,
)
from gateway.models.compute.core_use import LlamaThreads
from gateway.models.compute.engine_queue import EngineQueue, Turn
from gateway.models.llama_cpp.batch import BatchDecoder
from gateway.models.llama_cpp.chat_format import ChatFormat
from gateway.models.llama_cpp.generation_run import GenerationRun
from gateway.models.llama_cpp.gguf_bundles import BUNDLES, bundled_gguf
from gateway.models.llama_cpp.holds import SequenceLease, Warm, Warms
from gateway.models.llama_cpp.state_cache import LlamaStateCache
from gateway.models.tool_calls import check_tool_choice
from gateway.models.tool_decision import CALL_THRESHOLD, DECISION_BUDGET_SHARE, Decision, decision_systems
from gateway.models.weights import on_disk

log = logging.getLogger(__name__)

_INSTALL_HINT = "scripts/setup.sh builds and installs llama-cpp-python (or pip install llama-cpp-python)"


def resolve_gguf(model: str, cache_dir: Path) -> Path:
    """The GGUF file for the ``llm_model`` setting: a bundled name (joined once), else ``model`` as a
    path (``load_models`` refused anything else before loading, with
    ``gguf_bundles.check_gguf_setting``; a missing file here is llama.cpp's ModelNotFoundError).
    ModelNotFoundError when a bundle's package is missing."""
    if model in BUNDLES:
        return bundled_gguf(model, cache_dir)
    return Path(model).expanduser()


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
        self.weights = on_disk(path)
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

    def decide_tool(
        self, messages: list[ChatMessage], options: GenerationOptions, call_from: Optional[float] = None
    ) -> Optional[Decision]:
        """The call decision a :meth:`generate` with these arguments makes first ("auto" or
        "required" with tools), without generating a reply; None for other choices (or when out of
        its budget share). With ``call_from``, a tools' share at least that also generates the
        likeliest tool's call as :meth:`generate` would (``Decision.call``, ``Decision.grounding``:
        what the invented-argument check reads), so a benchmark sees what "auto" does
        (:func:`~gateway.models.tool_decision.auto_call`). Raises LanguageModelError for a bad
        ``tool_choice``."""
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
                run = self._run(turn, lease, options, lambda: False, 1)
                if call_from is None:
                    return run.decide(messages, options.tools, options.tool_choice)
                return run.decide_and_call(messages, options.tools, options.tool_choice, call_from)
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
                result = self._run(turn, lease, options, should_stop, max_tokens).execute(messages, on_text)
            finally:
                lease.release()
            result.queue_wait_s = turn.waited_s
            return result

    def _run(
        self,
        turn: Turn,
        lease: SequenceLease,
        options: GenerationOptions,
        should_stop: Callable[[], bool],
        max_tokens: int,
    ) -> GenerationRun:
        """One generation on ``lease`` with this engine's model, chat format, defaults and call settings."""
        return GenerationRun(
            self._llm,
            self.chat,
            turn,
            lease,
            options,
            should_stop,
            max_tokens,
            defaults=self._defaults,
            call_threshold=self.call_threshold,
            decision_budget_share=self.decision_budget_share,
        )


def _reply_options(options: GenerationOptions) -> GenerationOptions:
    """``options`` for the prompt a reply in words is read after: under "auto" it lists no tools."""
    return replace(options, tool_choice="none") if options.tool_choice == "auto" else options
