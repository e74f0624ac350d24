#!/usr/bin/env python3
"""Why the end of a turn takes what it takes, per recording: the VAD stage's own pause rules with
Silero and Smart Turn, on real recordings, without a call.

    PYTHONPATH=. .venv/bin/python scripts/bench_end_of_turn.py [FILE ...] [--rates 1.0,0.9,1.1]

Each recording (default: the speech recordings of ``../shared/fixtures/speech`` with a transcript)
is fed, at each playback rate of ``--rates`` (0.9: lower and slower), into the gateway's VAD stage
with the call's default turn settings, then 2 s of quiet. Printed per recording: how many turns the
stage made of it (more than one: the caller was cut off at a pause), and for each pause that Smart
Turn judged, where it was (ms into the speech), how long the pause went on in the recording, the
model's probability that the turn was complete, and the verdict the rules drew from it (complete /
not finished / mid-thought, see ``gateway.pipeline.turn``); then the end-of-turn wait of the last
turn: last voiced chunk -> turn ended, in input-stream time (model compute excluded: it is
``bench_turn.py``'s stage time that includes it).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np
from bargein_corpus import SHARED_SPEECH, to_rate
from bargein_offline import Context

from gateway.config import GatewayConfig
from gateway.media.audio_file import read_audio_file
from gateway.models.backends import load_backend
from gateway.models.silero import SileroVad
from gateway.pipeline.call_settings import CallSettings
from gateway.pipeline.events import InputCommitted, SpeechStopped
from gateway.pipeline.messages import AudioIn
from gateway.pipeline.queues import StageQueue
from gateway.pipeline.turn import MID_THOUGHT_BELOW, pause_rules
from gateway.pipeline.vad import VadStage

RATE = 16000
FRAME = 320  # 20 ms


class JudgedModel:
    """The end-of-turn model, noting each judgement: (input position in samples, probability)."""

    def __init__(self, model: Any, ctx: Context) -> None:
        self._model, self._ctx = model, ctx
        self.sample_rate = model.sample_rate
        self.judgements: list[tuple[int, float]] = []

    def end_of_turn_probability(self, audio: np.ndarray) -> float:
        probability = float(self._model.end_of_turn_probability(audio))
        self.judgements.append((self._ctx.position, probability))
        return probability


def load(path: Path) -> np.ndarray:
    """int16 mono 16 kHz (``.raw``: headerless int16 16 kHz, as pocketsphinx ships them)."""
    if path.suffix == ".raw":
        return np.fromfile(path, dtype="<i2")
    return read_audio_file(path, RATE)


def voiced_runs(vad: SileroVad, audio: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    """(start, end) samples of each voiced stretch of ``audio`` (512-sample Silero chunks)."""
    runs: list[tuple[int, int]] = []
    stream = vad.new_stream()
    for begin in range(0, audio.size - 511, 512):
        if stream.speech_probability(audio[begin : begin + 512].astype(np.float32) / 32768) >= threshold:
            if runs and runs[-1][1] == begin:
                runs[-1] = (runs[-1][0], begin + 512)
            else:
                runs.append((begin, begin + 512))
    return runs


def verdict(probability: float, complete_above: Optional[float]) -> str:
    if complete_above is not None and probability > complete_above:
        return "complete"
    return "mid-thought" if probability < MID_THOUGHT_BELOW else "not finished"


def run(name: str, audio: np.ndarray, vad: SileroVad, smart_turn: Any, settings: CallSettings) -> None:
    ctx = Context(settings=settings, playing=False)
    judged = JudgedModel(smart_turn, ctx)
    stage = VadStage(ctx, StageQueue(), StageQueue(), vad, judged)
    lead = RATE // 2
    samples = np.concatenate([np.zeros(lead, np.int16), audio, np.zeros(2 * RATE, np.int16)])
    for begin in range(0, samples.size, FRAME):
        ctx.position = begin + FRAME
        stage.handle(AudioIn("offline", samples=samples[begin : begin + FRAME], received_at=time.monotonic()))
    rules = pause_rules(settings.turn, True)
    runs = voiced_runs(vad, samples, settings.turn.threshold)
    commits = [at for at, event in ctx.events if isinstance(event, InputCommitted)]
    stops = [event for _, event in ctx.events if isinstance(event, SpeechStopped)]
    print(f"{name}: {len(commits)} turn(s), speech {(runs[-1][1] - runs[0][0]) * 1000 / RATE if runs else 0:.0f} ms")
    for at, probability in judged.judgements:
        pause_start = max((end for _, end in runs if end <= at), default=at)
        resumed = min((start for start, _ in runs if start >= at), default=samples.size)
        pause_ms = (resumed - pause_start) * 1000 / RATE
        pause_text = f"{pause_ms:.0f} ms" if resumed < samples.size - 2 * RATE else "(the end)"
        print(
            f"    pause at {(pause_start - lead) * 1000 / RATE:6.0f} ms, lasts {pause_text:>9}: Smart Turn "
            f"{probability:.3f} -> {verdict(probability, rules.complete_above)}"
        )
    if stops and commits:
        last_voiced = stops[-1].audio_end_ms * RATE // 1000  # the stage's stream position (the lead included)
        print(f"    end-of-turn wait (last voiced -> turn ended): {(commits[-1] - last_voiced) * 1000 / RATE:.0f} ms")


def recordings() -> list[Path]:
    table = SHARED_SPEECH / "transcripts.tsv"
    names = [line.split("\t")[0] for line in table.read_text().splitlines()[1:] if "\t(" not in line]
    return [SHARED_SPEECH / name for name in names if (SHARED_SPEECH / name).exists()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--rates", default="1.0,0.9,1.1", help="playback rates (0.9: lower and slower)")
    args = parser.parse_args()
    config = GatewayConfig()
    settings = CallSettings.defaults(config)
    vad, smart_turn = SileroVad(), load_backend("end_of_turn", config)
    rules = pause_rules(settings.turn, True)
    print(
        f"rules: Smart Turn asked at {rules.check_ms} ms of pause; complete above {rules.complete_above} ends "
        f"the turn there; else silence {rules.silence_ms} ms, mid-thought (< {MID_THOUGHT_BELOW}) "
        f"{rules.mid_thought_ms} ms"
    )
    for path in args.files or recordings():
        audio = load(path)
        for rate in (float(r) for r in args.rates.split(",")):
            played = audio if rate == 1.0 else to_rate(audio, int(RATE * rate), RATE)
            run(f"{path.name} x{rate:g}", played, vad, smart_turn, settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
