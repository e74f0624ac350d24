#!/usr/bin/env python3
"""Decode speed of the llama.cpp engine: one sequence on 1 and 2 threads, and batched steps.

    .venv/bin/python scripts/bench_batch_decode.py [--model qwen2.5-coder-1.5b] [--tokens 32]

First the machine's plain decode speed (tokens/s of one sequence, 1 and 2 threads: quote it beside
any latency figure), then the cost of one ``BatchDecoder`` step advancing 1, 2, 4 and 8 sequences
at once (ms per step, aggregate tokens/s), on 1 and 2 threads. This is the measurement behind
continuous batching in process (``gateway.models.llama_cpp.batch``): on a CPU one step over N sequences
costs far less than N steps over one. (llama.cpp's own server with parallel slots runs the same
kernels behind HTTP; it is not installed with the gateway: ``llama_cpp.server``, the Python one,
serves one request at a time.)
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gateway.config import GatewayConfig
from gateway.models.base import ChatMessage, GenerationOptions
from gateway.models.compute.core_use import LlamaThreads
from gateway.models.compute.decode_capacity import StepTimes
from gateway.models.llama_cpp.llm import LlamaCppLanguageModel


@contextlib.contextmanager
def on_threads(decoder: Any, threads: int, prompt: int = 0) -> Iterator[None]:
    """Every step on ``threads`` threads for a while, its step times kept apart: a gateway running
    in the same process (``bench_talkers.py``) judges its talking capacity by the steps of its own
    thread settings, which a 2-thread probe would otherwise skew."""
    saved = decoder.threads, decoder.step_times
    decoder.threads = LlamaThreads(decode=threads, prompt=prompt or threads, several=threads)
    decoder.step_times = StepTimes()
    try:
        yield
    finally:
        decoder.threads, decoder.step_times = saved


def cpu_backend() -> str:
    """The instruction sets of the llama.cpp CPU backend in use (``llama_print_system_info``: with
    the wheel of ``scripts/build_llama_wheel.sh``, the variant ggml chose for this CPU)."""
    import llama_cpp

    return bytes(llama_cpp.llama_print_system_info()).decode(errors="replace").strip()


def decode_speed(engine: Any, threads: int, tokens: int = 32) -> float:
    """Tokens/s of one sequence decoding ``tokens`` tokens alone on ``threads`` threads (llama.cpp
    context of ``engine``'s BatchDecoder, greedy on a short prompt)."""
    decoder = engine.decoder
    with on_threads(decoder, threads):
        prompt = engine.chat.prompt_tokens(
            [ChatMessage("user", "Count from one to fifty.")], tokens, GenerationOptions()
        )
        lease = decoder.lease()
        try:
            logits, _ = lease.evaluate(prompt, lambda: False)
            held = list(prompt)
            started = time.monotonic()
            for _ in range(tokens):
                assert logits is not None
                held.append(int(logits.argmax()))
                logits, _ = lease.evaluate(held, lambda: False)
            return tokens / (time.monotonic() - started)
        finally:
            lease.release()


QUESTIONS = (
    "Which city on the Baltic coast has the oldest harbour?",
    "What should I pack for a rainy week by the sea?",
    "How long should I boil an egg for a soft yolk?",
)


def prompt_read_ms(engine: Any, threads: int) -> tuple[float, int]:
    """Median ms to the first token of a spoken-length question nothing holds yet (the system
    prompt cached, as in a call), with prompt chunks on ``threads`` threads and decode steps on 1;
    and the median tokens it read."""
    decoder = engine.decoder
    system = ChatMessage("system", GatewayConfig().instructions)
    times, read = [], []
    with on_threads(decoder, 1, prompt=threads):
        for question in QUESTIONS:
            decoder.forget()
            engine.generate([system, ChatMessage("user", "Hi.")], 1, lambda: False, lambda piece: None)
            started = time.monotonic()
            result = engine.generate([system, ChatMessage("user", question)], 1, lambda: False, lambda piece: None)
            times.append((time.monotonic() - started) * 1000)
            read.append(result.prompt_tokens - result.cached_tokens)
    return sorted(times)[1], sorted(read)[1]


@contextlib.contextmanager
def other_core_busy() -> Iterator[None]:
    """A process spinning on one core for a while (as Whisper or Piper of another caller would)."""
    spinner = subprocess.Popen(
        [sys.executable, "-c", "import time\nend = time.time() + 120\nwhile time.time() < end: pass"]
    )
    try:
        time.sleep(0.3)
        yield
    finally:
        spinner.kill()
        spinner.wait()


def batched_step_ms(engine: Any, sequences: int, threads: int, tokens: int = 16) -> float:
    """Mean ms per decode step with ``sequences`` sequences decoding together on ``threads`` threads."""
    decoder = engine.decoder
    with on_threads(decoder, threads):
        return _batched_steps(engine, decoder, sequences, tokens)


def _batched_steps(engine: Any, decoder: Any, sequences: int, tokens: int) -> float:
    prompts = [
        engine.chat.prompt_tokens([ChatMessage("user", f"Count from {i} to {i + 40}.")], tokens, GenerationOptions())
        for i in range(sequences)
    ]
    leases = [decoder.lease() for _ in range(sequences)]
    ready = threading.Barrier(sequences + 1)
    try:

        def run(lease: Any, prompt: list[int]) -> None:
            logits, _ = lease.evaluate(prompt, lambda: False)
            held = list(prompt)
            ready.wait()
            for _ in range(tokens):
                held.append(int(logits.argmax()))
                logits, _ = lease.evaluate(held, lambda: False)

        workers = [threading.Thread(target=run, args=pair) for pair in zip(leases, prompts, strict=True)]
        for worker in workers:
            worker.start()
        ready.wait()
        steps_before, started = decoder.steps, time.monotonic()
        for worker in workers:
            worker.join()
        return (time.monotonic() - started) * 1000 / max(1, decoder.steps - steps_before)
    finally:
        for lease in leases:
            lease.release()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=GatewayConfig().llm_model)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--sequences", default="1,2,4,8")
    args = parser.parse_args()
    counts = [int(n) for n in args.sequences.split(",")]
    engine = LlamaCppLanguageModel(args.model, Path(GatewayConfig().model_cache_dir), sequences=max(counts))
    print(f"llama.cpp {cpu_backend()}")
    print(f"{args.model}: decode {decode_speed(engine, 1, args.tokens):.1f} tok/s on 1 thread, ", end="")
    print(f"{decode_speed(engine, 2, args.tokens):.1f} on 2\n")
    print("| prompt threads | other core | first token of a new question, ms | tokens read |")
    print("|---|---|---|---|")
    for busy in (False, True):
        for threads in (1, 2):
            with other_core_busy() if busy else contextlib.nullcontext():
                ms, read = prompt_read_ms(engine, threads)
            print(f"| {threads} | {'busy' if busy else 'idle'} | {ms:.0f} | {read} |")
    print()
    print("| sequences | threads | ms per step | aggregate tok/s |")
    print("|---|---|---|---|")
    for threads in (1, 2):
        for n in counts:
            ms = batched_step_ms(engine, n, threads, args.tokens // 2)
            print(f"| {n} | {threads} | {ms:.0f} | {n * 1000 / ms:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
