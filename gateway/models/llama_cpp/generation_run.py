"""One generation of the llama.cpp engine on its leased KV sequence: the call decision, a call
under its tools' grammar, or a reply in words (the steps are in ``gateway.models.llama_cpp.llm``'s
docstring).

:class:`GenerationRun` holds what one ``generate`` (or ``decide_tool``) needs while it runs: the
request's options resolved against the engine's defaults, its deadlines (the compute budget and the
decision's share of it), its random generator, and the tokens of the call it generated with their
log-probabilities (:func:`~gateway.models.tool_decision.invented` judges them).
"""

from __future__ import annotations

import codecs
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Optional

import numpy as np

from gateway.models.base import ChatMessage, Generation, GenerationOptions, LanguageModelError, ToolCall
from gateway.models.compute.engine_queue import Turn
from gateway.models.heard_values import unheard, unheard_names
from gateway.models.llama_cpp.chat_format import ChatFormat
from gateway.models.llama_cpp.grammar_sampler import GrammarSampler, sample_token
from gateway.models.llama_cpp.holds import SequenceLease
from gateway.models.llama_cpp.option_scores import score_options, token_logprob
from gateway.models.tool_calls import allowed_tools, call_schema, classify_start, complete_json, new_call_id, parse_call
from gateway.models.tool_decision import (
    CHAIN_CALL_THRESHOLD,
    HEARD_CHECK,
    MAX_CHAIN_CALLS,
    NAMES_CHECK,
    Decision,
    chain_since_request,
    decide,
    decision_messages,
    grounding,
    invented,
    option_names,
    repeats,
    unable_note,
    words_option,
)

log = logging.getLogger(__name__)

CALL_TOKENS = 256  # a constrained call may use at least this many tokens, whatever max_tokens says


class GenerationRun:
    """One generation on its leased KV sequence: prompt, decode, maybe a constrained call.

    ``model``: the engine's ``llama_cpp.Llama`` (vocabulary, detokenizing); ``chat``: its chat
    format; ``defaults``: the engine's options for what the request leaves None;
    ``call_threshold`` and ``decision_budget_share``: the engine's (``LlamaCppLanguageModel``)."""

    def __init__(
        self,
        model: Any,
        chat: ChatFormat,
        turn: Turn,
        lease: SequenceLease,
        requested: GenerationOptions,
        should_stop: Callable[[], bool],
        max_tokens: int,
        *,
        defaults: GenerationOptions,
        call_threshold: float,
        decision_budget_share: float,
    ) -> None:
        self.chat = chat
        self.llm = model
        self.call_threshold = call_threshold
        self.lease = lease
        self.options = requested
        self.temperature = requested.temperature if requested.temperature is not None else defaults.temperature or 0.0
        self.top_p = requested.top_p if requested.top_p is not None else defaults.top_p or 0.95
        budget = requested.budget_s if requested.budget_s is not None else defaults.budget_s
        self.deadline = turn.started + budget if budget and budget > 0 else float("inf")
        share = decision_budget_share  # of the budget the call decision may use
        self.decision_deadline = turn.started + share * budget if budget and budget > 0 else float("inf")
        self.should_stop = should_stop
        self.max_tokens = max(1, max_tokens)
        self.pace = requested.due
        self.paced_s = 0.0  # time a paced token was let wait before it was due (not budget)
        self.cached = 0
        self.call_probability: Optional[float] = None
        # Whether the call's tokens are judged (``invented``: a first call under "auto"), and those
        # tokens then: text, log-probability (unconstrained, before the grammar).
        self.judged = False
        self.call_pieces: list[tuple[str, float]] = []
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
        unable: list = []  # the tools a starved first decision could not weigh: the reply is told so
        if tools and choice in ("auto", "required"):
            decision = self.decide(messages, tools, choice)
            if decision is None and self.should_stop():
                return Generation("", 0, "cancelled")
            if decision is None and choice == "required":
                raise LanguageModelError("the call decision ran out of its compute budget: no tool could be chosen")
            if decision is None:  # its share of the budget ran out: "auto" answers in words, with the rest
                log.warning("tool decision ran out of its compute budget: answered in words")
                unable = [] if chain else tools  # after a tool's output the words answer the outputs
            self.call_probability = decision.call_probability if decision else None
            tools = [t for t in tools if decision and t.name == decision.tool]
        may_call = len(chain) < MAX_CHAIN_CALLS
        if tools:
            self.judged = choice == "auto" and not chain
            called = self.make_call(messages, tools)
            if choice != "auto" or not called.tool_calls:
                return called
            if chain and repeats(called.tool_calls[0], chain):
                log.debug("tool call %s repeats the chain's: answered in words", called.tool_calls[0].name)
            elif self.judged and invented(self.call_pieces):
                log.debug("tool call %s has only invented arguments: answered in words", called.tool_calls[0].name)
            elif self.judged and HEARD_CHECK and unheard(called.tool_calls[0], tools[0], messages):
                log.debug("tool call %s has a value nobody said: answered in words", called.tool_calls[0].name)
            elif self.judged and NAMES_CHECK and unheard_names(called.tool_calls[0], tools[0], messages):
                log.debug("tool call %s has a name nobody said: answered in words", called.tool_calls[0].name)
            else:
                return called
            may_call = False
        if unable:  # nothing was called: the reply may not claim it was (:data:`~tool_decision.UNABLE`)
            messages = [*messages, unable_note(unable)]
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

    def decide_and_call(
        self, messages: list[ChatMessage], tools: list, choice: str, call_from: float
    ) -> Optional[Decision]:
        """:meth:`decide`, then, when the tools' share is at least ``call_from``, the call of the
        likeliest tool as :meth:`execute` would make it, kept in the decision (``call``, and its
        ``grounding`` when "auto" would judge it); the decision alone when it calls no tool."""
        decision = self.decide(messages, tools, choice)
        if decision is None or decision.likeliest is None or decision.call_probability < call_from:
            return decision
        self.judged = choice == "auto" and not chain_since_request(messages)
        made_tool = [t for t in tools if t.name == decision.likeliest]
        made = self.make_call(messages, made_tool)
        decision.call = made.tool_calls[0] if made.tool_calls else None
        decision.grounding = grounding(self.call_pieces) if self.judged else None
        if self.judged and decision.call is not None:
            decision.unheard = unheard(decision.call, made_tool[0], messages)
            decision.unheard_names = unheard_names(decision.call, made_tool[0], messages)
        return decision

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
        threshold = CHAIN_CALL_THRESHOLD if chained else self.call_threshold
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
        sampler = GrammarSampler(self.llm, chat.grammar(call_schema(tools)), banned=chat.control_tokens())
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        body, count, finish = "", 0, "length"
        cap = max(CALL_TOKENS, self.max_tokens - spent)
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
                if self.judged:
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
