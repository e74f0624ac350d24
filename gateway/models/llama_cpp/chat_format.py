"""A GGUF model's chat format: how a conversation becomes prompt tokens, and how tokens read back.

The prompt is rendered with the model's own chat template (GGUF ``tokenizer.chat_template``, ChatML
when it carries none; tools are listed through it when it supports them, else described in the
system message) and fitted into ``n_ctx`` tokens by dropping the oldest turns
(``gateway.models.llama_cpp.prompt_fit``). For tool calls it knows the tokens that open one
(``<tool_call>``, a piece starting with a code fence or ``{``) and builds the grammar a call is
generated under (``LlamaGrammar.from_json_schema`` of the tools' JSON schemas, the recent ones kept).
"""

from __future__ import annotations

import json
from typing import Any, Optional

import numpy as np

from gateway.models.base import TOOL_CHOICES, ChatMessage, GenerationOptions, LanguageModelError
from gateway.models.llama_cpp.prompt_fit import fit_messages
from gateway.models.llama_cpp.state_cache import common_prefix
from gateway.models.tool_calls import (
    CALL_PREFIX,
    allowed_tools,
    cue_answer,
    flatten_for_plain_template,
    plain_tool_prompt,
    template_message,
    tools_for_request,
)

# ChatML, for a GGUF that carries no chat template.
_CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
_GRAMMARS_KEPT = 32  # grammars of recent tool sets, built once each


class ChatFormat:
    """The chat template and vocabulary of ``model`` (a ``llama_cpp.Llama``), for prompts of at most
    ``n_ctx`` tokens. Finding the call openers takes ~1 s for a 151k vocabulary, the control tokens
    ~0.15 s: done once, here, for templates with tools, else at the first :meth:`openers` /
    :meth:`control_tokens`."""

    def __init__(self, model: Any, n_ctx: int) -> None:
        import llama_cpp
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self._lib = llama_cpp
        self._llm = model
        self.n_ctx = n_ctx
        metadata = model.metadata
        template = metadata.get("tokenizer.chat_template") or _CHATML
        self._template_tools = "tools" in template
        eos_text = self._token_text(model.token_eos())
        bos = model.token_bos()
        self._bos = bos if metadata.get("tokenizer.ggml.add_bos_token") == "true" and bos >= 0 else None
        self._formatter: Any = Jinja2ChatFormatter(template, eos_token=eos_text, bos_token=self._token_text(bos))
        call_token = model.tokenize(CALL_PREFIX.strip().encode(), add_bos=False, special=True)
        self.call_token: Optional[int] = call_token[0] if len(call_token) == 1 else None
        self._grammars: dict[str, Any] = {}
        self._openers: Optional[np.ndarray] = None
        self._controls: Optional[np.ndarray] = None
        if self._template_tools:
            self._openers = np.array(self._opener_tokens(), dtype=np.intp)
            self.control_tokens()  # ~0.15 s: not in a first call's budget

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self._llm.detokenize([token], special=True).decode("utf-8", errors="replace")

    # ----- prompt -----

    def render(self, messages: list[ChatMessage], options: GenerationOptions) -> str:
        """The prompt text for ``messages`` (and the tools ``options`` allows) in the model's template;
        a tool output at the end is followed by the cue to answer it (``cue_answer``) unless
        ``options`` name the function whose call follows (a chained call)."""
        tools = allowed_tools(options.tools, options.tool_choice)
        if options.tool_choice in TOOL_CHOICES:  # a named function: a call follows, not words
            messages = cue_answer(messages)
        if tools and not self._template_tools:
            messages = flatten_for_plain_template(messages)
            if messages and messages[0].role == "system":
                messages = [ChatMessage("system", messages[0].content + plain_tool_prompt(tools)), *messages[1:]]
            return self._formatter(messages=[template_message(m) for m in messages]).prompt
        if not self._template_tools:
            messages = flatten_for_plain_template(messages)
        return self._formatter(
            messages=[template_message(m) for m in messages], tools=tools_for_request(tools) if tools else None
        ).prompt

    def tokenize(self, text: str) -> list[int]:
        """Tokens of prompt ``text`` (special tokens parsed), with BOS when the model wants one."""
        tokens = self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        if self._bos is not None and (not tokens or tokens[0] != self._bos):
            tokens = [self._bos, *tokens]
        return tokens

    def prompt_tokens(self, messages: list[ChatMessage], max_tokens: int, options: GenerationOptions) -> list[int]:
        """Tokens of the prompt after fitting it into ``n_ctx`` with room for the reply."""
        reserve = min(max_tokens, self.n_ctx // 4) + 16

        def count(candidate: list[ChatMessage]) -> int:
            return len(self.tokenize(self.render(candidate, options)))

        fitted = fit_messages(messages, count, self.n_ctx - reserve)
        return self.tokenize(self.render(fitted, options))

    def prefix_tokens(self, messages: list[ChatMessage], options: GenerationOptions) -> list[int]:
        """The tokens every prompt of a session with these instructions and tools starts with: the
        common head of the prompt rendered with two different user messages."""
        head = [m for m in messages if m.role == "system"][:1]
        one = self.tokenize(self.render([*head, ChatMessage("user", "a")], options))
        two = self.tokenize(self.render([*head, ChatMessage("user", "b")], options))
        return one[: common_prefix(np.asarray(one), np.asarray(two))]

    # ----- reading tokens back -----

    def is_eog(self, token: int) -> bool:
        """True for a token that ends generation (EOS, ``<|im_end|>``...)."""
        return bool(self._lib.llama_vocab_is_eog(self._llm._model.vocab, token))

    def control_tokens(self) -> np.ndarray:
        """The control tokens that do not end generation (``<|im_start|>``, ``<|fim_prefix|>``,
        ``<|vision_pad|>``...): no text (they detokenize to nothing), yet llama.cpp's grammar lets
        them into a JSON string, since their pieces read as plain characters there. A call never
        takes one (:class:`~gateway.models.llama_cpp.grammar_sampler.GrammarSampler` ``banned``)."""
        if self._controls is None:
            vocab = self._llm._model.vocab
            found = [
                t
                for t in range(self._llm.n_vocab())
                if self._lib.llama_vocab_is_control(vocab, t) and not self._lib.llama_vocab_is_eog(vocab, t)
            ]
            self._controls = np.array(found, dtype=np.intp)
        return self._controls

    def grammar(self, schema: dict[str, Any]) -> Any:
        """The ``LlamaGrammar`` of a call matching ``schema`` (built once per tool set). Raises
        LanguageModelError for a schema llama.cpp's converter cannot take."""
        from llama_cpp import LlamaGrammar

        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            try:
                grammar = LlamaGrammar.from_json_schema(key, verbose=False)
            except Exception as exc:  # the converter raises plain Exceptions for schemas it cannot take
                raise LanguageModelError(f"tool parameters schema not supported: {exc}") from exc
            while len(self._grammars) >= _GRAMMARS_KEPT:
                self._grammars.pop(next(iter(self._grammars)))  # the oldest tool set
            self._grammars[key] = grammar
        return self._grammars[key]

    def openers(self) -> np.ndarray:
        """The tokens that open a tool call (indices into the vocabulary)."""
        if self._openers is None:
            self._openers = np.array(self._opener_tokens(), dtype=np.intp)
        return self._openers

    def _opener_tokens(self) -> list[int]:
        found = [] if self.call_token is None else [self.call_token]
        for token in range(self._llm.n_vocab()):
            piece = self._llm.detokenize([token]).lstrip()
            if piece.startswith((b"```", b"{")):
                found.append(token)
        return found
