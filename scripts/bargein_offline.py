#!/usr/bin/env python3
"""Barge-in decisions of the real VAD and STT stages on the corpus, without a call: quick, for tuning.

    PYTHONPATH=. .venv/bin/python scripts/bargein_offline.py [--split tuning|held-out|fresh|fresh2|...|fresh5|all] [-v]
        [--turn-detector silence|smart_turn] [--two-part PAUSE_MS]

Each clip of ``scripts/bargein_corpus.py`` is played (after 1 s of quiet, then 2 s of quiet) into
the gateway's own VAD stage (Silero, the call's default turn settings) with a reply "playing", and
its probes go to the STT stage (Whisper base) on the same thread. STT's real compute time is
honoured: a probe's answer is handed back only once that much more caller audio has gone in, as
when STT runs beside the VAD in a call. Printed per clip: the decision, when it came (ms after the
clip's voice onset, in input-stream time) and the probes (``sent>answered:word:probability ...``, both
ms after the onset; with ``-v``); then precision/recall and decision
times per split (tuning / held-out / fresh, see ``scripts/bargein_corpus.py``) and per voice, the Whisper probe
compute time, with the machine's llama.cpp decode speed first (to read the times against).
The call itself (WebRTC, the LLM answering, the events the client sees) is
``scripts/bench_bargein.py``'s.

``--turn-detector``: how the VAD stage ends the held turn. ``silence`` (the default, as every earlier
table here): after ``silence_duration_ms`` (500 ms), so a pause inside a clip never ends it.
``smart_turn`` (a call's default): Smart Turn judges each pause at ~192 ms and may end the held turn
there, inside the overlap ("Wait," | "stop."). ``--two-part PAUSE_MS``: instead of the split's clips,
two of them said one after the other by the same voice with PAUSE_MS between their voiced parts
(:func:`two_part_clips`: each backchannel twice, each with the next, and a backchannel then each
interruption); a pair holding an interruption is one.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
from bargein_corpus import BACKCHANNEL, SPLITS, Clip, clips, to_rate

from gateway.config import GatewayConfig
from gateway.models.base import ScoredTranscript
from gateway.models.silero import SileroVad
from gateway.models.whisper import WhisperSpeechToText
from gateway.pipeline import backchannels, bargein
from gateway.pipeline.call_settings import CallSettings
from gateway.pipeline.events import BargeInDecided, PipelineEvent, SpeechStarted
from gateway.pipeline.messages import AudioIn, BargeInHeard, Utterance
from gateway.pipeline.queues import StageQueue
from gateway.pipeline.stt import SttStage
from gateway.pipeline.vad import VadStage

RATE = 16000
FRAME = 320  # 20 ms
CALL = "offline"
LATE_MS = 800  # an interruption decided later than this after its onset is late (issue 29)


@dataclass
class Context:
    """The StageContext of one clip: a reply is playing; events land in a list."""

    settings: CallSettings = field(default_factory=CallSettings)
    call_id: Optional[str] = CALL
    events: list[tuple[int, PipelineEvent]] = field(default_factory=list)
    heard: list[tuple[float, BargeInHeard]] = field(default_factory=list)
    position: int = 0  # samples fed so far
    playing: bool = True
    paused_at: Optional[int] = None
    pauses: list[tuple[int, int]] = field(default_factory=list)

    def is_current(self, generation: int) -> bool:
        return True

    def notify(self, event: PipelineEvent) -> None:
        self.events.append((self.position, event))

    def on_speech_started(self, event: SpeechStarted) -> None:
        self.events.append((self.position, event))
        self.playing = False

    def pause_reply(self) -> bool:
        if self.playing and self.paused_at is None:
            self.paused_at = self.position
        return self.playing

    def resume_reply(self) -> None:
        if self.paused_at is not None:
            self.pauses.append((self.paused_at, self.position))
            self.paused_at = None

    def barge_in_heard(self, call_id: str, speculation: int, heard: ScoredTranscript) -> None:
        message = BargeInHeard(
            call_id, speculation=speculation, transcript=heard.text, words=heard.words, trusted=heard.trusted
        )
        self.heard.append((0.0, message))

    def echo_share(self, audio: np.ndarray, end_time: float) -> float:
        return 0.0

    def reply_words_since(self, since: float) -> list[str]:
        return []  # the "reply" is silence: no echo of its words in the clips


@dataclass(frozen=True)
class PairClip(Clip):
    """Two clips said one after the other (:func:`two_part_clips`); ``second_s``: seconds from the
    pair's onset to the second's (its -30 dBFS onset)."""

    second_s: float = 0.0


@dataclass
class Outcome:
    clip: Clip
    decision: str  # "kept" or "interrupted"
    decided_ms: Optional[float]  # after the voice onset, input-stream time
    probes: list[str]
    probe_ms: list[float]  # compute time of each probe (Whisper's transcribe_words), ms
    decided: list[str] = field(default_factory=list)  # each gateway.barge_in: "decision 'transcript'"
    joined: int = 0  # parts that joined the held turn after the VAD ended it (VadStage.joined_parts)

    @property
    def own_ms(self) -> Optional[float]:
        """The decision after the onset of what decided it: a pair's second part's, else the clip's."""
        if self.decided_ms is None:
            return None
        return self.decided_ms - (self.clip.second_s * 1000 if isinstance(self.clip, PairClip) else 0.0)


def two_part_clips(chosen: list[Clip], pause_ms: int) -> list[Clip]:
    """Per voice: each backchannel said twice ("Okay." | "Okay."), each with the next one ("Okay." |
    "Mm-hmm."), and its first backchannel then each interruption ("Okay." | "Wait, stop."), with
    ``pause_ms`` from the last loud sample (> -40 dBFS) of the first to the first loud one of the second."""
    made: list[Clip] = []
    for voice in dict.fromkeys(c.voice for c in chosen):
        said = [c for c in chosen if c.voice == voice]
        backs = [c for c in said if c.kind == BACKCHANNEL]
        pairs = [(b, b) for b in backs] + list(zip(backs, backs[1:] + backs[:1], strict=True))
        pairs += [(backs[0], c) for c in said if c.kind != BACKCHANNEL] if backs else []
        for first, second in pairs:
            loud_a = np.flatnonzero(np.abs(first.audio.astype(np.int32)) > 300)
            loud_b = np.flatnonzero(np.abs(second.audio.astype(np.int32)) > 300)
            if not loud_a.size or not loud_b.size:
                continue
            gap = np.zeros(int(pause_ms * 48000 / 1000), np.int16)
            audio = np.concatenate([first.audio[: loud_a[-1] + 1], gap, second.audio[loud_b[0] :]])
            kind = BACKCHANNEL if second.kind == first.kind == BACKCHANNEL else second.kind
            text = f"{first.text} | {second.text}"
            tuning = first.tuning_phrase and second.tuning_phrase
            second_s = (loud_a[-1] + 1 + gap.size - loud_b[0]) / 48000 + second.onset_s - first.onset_s
            made.append(PairClip(voice, text, kind, tuning, audio, second_s))
    return made


def run_clip(clip: Clip, vad_model, stt_model, settings: CallSettings, end_of_turn=None) -> Outcome:
    ctx = Context(settings=settings)
    stt_in = StageQueue()
    vad = VadStage(ctx, StageQueue(), stt_in, vad_model, end_of_turn)
    stt = SttStage(ctx, stt_in, None, stt_model)
    speech = to_rate(clip.audio, 48000, RATE)
    lead = RATE  # 1 s of quiet first
    audio = np.concatenate([np.zeros(lead, np.int16), speech, np.zeros(2 * RATE, np.int16)])
    onset = lead + int(clip.onset_s * RATE)
    busy_until = 0  # STT is working until this input position
    answers: list[tuple[int, BargeInHeard]] = []
    probes: list[str] = []
    probe_ms: list[float] = []
    sent: dict[int, int] = {}  # probe number -> input position it was sent at
    for begin in range(0, audio.size, FRAME):
        ctx.position = begin + FRAME
        vad.handle(AudioIn(CALL, samples=audio[begin : begin + FRAME], received_at=time.monotonic()))
        while (queued := stt_in.get(timeout=0)) is not None:
            assert isinstance(queued, Utterance)
            sent[queued.speculation] = ctx.position
            started = time.perf_counter()
            stt.handle(queued)
            probe_ms.append((time.perf_counter() - started) * 1000)
            spent = int(probe_ms[-1] * RATE / 1000)
            busy_until = max(busy_until, ctx.position) + spent
            for _, message in ctx.heard:
                answers.append((busy_until, message))
                words = " ".join(f"{w.text}:{w.probability:.2f}" for w in message.words)
                words += (" ?" if "?" in message.transcript else "") + ("" if message.trusted else " (untrusted)")
                at = sent.get(message.speculation, ctx.position)
                probes.append(f"{(at - onset) * 1000 // RATE}>{(busy_until - onset) * 1000 // RATE}:{words}")
            ctx.heard.clear()
        while answers and answers[0][0] <= ctx.position:
            vad.handle(answers.pop(0)[1])
    decided = [(at, e) for at, e in ctx.events if isinstance(e, BargeInDecided)]
    started = [at for at, e in ctx.events if isinstance(e, SpeechStarted)]
    decision = "interrupted" if started else "kept"
    at = started[0] if started else (decided[0][0] if decided else None)
    said = [f"{e.decision} {e.transcript!r}" for _, e in decided]
    joined = getattr(vad, "joined_parts", 0)  # main before h40 has no such count
    return Outcome(clip, decision, None if at is None else (at - onset) * 1000 / RATE, probes, probe_ms, said, joined)


def _row(label: str, chosen: list[Outcome]) -> str:
    backchannels = [o for o in chosen if o.clip.kind == BACKCHANNEL]
    interruptions = [o for o in chosen if o.clip.kind != BACKCHANNEL]
    kept = sum(o.decision == "kept" for o in backchannels)
    obeyed = [o for o in interruptions if o.decision == "interrupted" and o.decided_ms is not None]
    cut = len(backchannels) - kept
    precision = f"{len(obeyed) / (len(obeyed) + cut):.0%}" if obeyed or cut else "-"
    recall = f"{len(obeyed) / len(interruptions):.0%}" if interruptions else "-"

    def spread(times: list[float]) -> str:
        return f"{np.median(times):.0f} / {max(times):.0f}" if times else "-"

    own = [o.own_ms for o in obeyed if o.own_ms is not None]
    late = f"{sum(t > LATE_MS for t in own)}/{len(own)}" if own else "-"
    decided = spread([o.decided_ms for o in obeyed if o.decided_ms is not None])
    return (
        f"| {label} | {kept}/{len(backchannels)} | {len(obeyed)}/{len(interruptions)} | {precision} | {recall} "
        f"| {decided} | {spread(own)} | {late} |"
    )


def report(outcomes: list[Outcome]) -> None:
    """Per split and per voice: backchannels kept, interruptions obeyed, and as LiveKit reports its
    adaptive interruption, precision (interruptions decided that were interruptions) and recall
    (interruptions obeyed); decision time of the interruptions obeyed (ms after the clip's voice
    onset, p50 / max; then after the onset of the interruption itself, a two-part clip's second
    part) and how many were decided more than :data:`LATE_MS` after it (issue 29: the audio
    cleared within 800 ms of the onset; it clears a few ms after the decision)."""
    header = (
        "| {} | backchannels kept | interruptions obeyed | precision | recall | decided p50 / max ms "
        f"| after its own onset p50 / max ms | decided > {LATE_MS} ms after it |\n|---|---|---|---|---|---|---|---|"
    )
    print("\n" + header.format("split"))
    for split in SPLITS:
        chosen = [o for o in outcomes if o.clip.split == split]
        if chosen:
            print(_row(f"{split} ({len({o.clip.voice for o in chosen})} voices)", chosen))
    print("\n" + header.format("voice (split)"))
    for voice in dict.fromkeys(o.clip.voice for o in outcomes):
        chosen = [o for o in outcomes if o.clip.voice == voice]
        splits = "/".join(sorted({o.clip.split for o in chosen}))
        print(_row(f"{voice} ({splits})", chosen))
    probes = [ms for o in outcomes for ms in o.probe_ms]
    if probes:
        print(f"\nWhisper probe compute: p50 {np.median(probes):.0f} ms, p90 {np.percentile(probes, 90):.0f} ms")


def print_decode_speed(config: GatewayConfig) -> None:
    """The machine's llama.cpp decode speed (1 and 2 threads), to read the decision times against."""
    from bench_batch_decode import decode_speed

    from gateway.models.backends import load_backend

    llm = load_backend("llm", config)
    if hasattr(llm, "decoder"):
        print(f"machine: decode {decode_speed(llm, 1):.1f} tok/s on 1 thread, {decode_speed(llm, 2):.1f} on 2")
    close = getattr(llm, "close", None)
    if close is not None:
        close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="tuning", choices=(*SPLITS, "all"))
    parser.add_argument("--voice", action="append", default=[])
    parser.add_argument("-v", "--verbose", action="store_true", help="print each clip's probes")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="try another value of a "
        "constant of gateway.pipeline.bargein or .backchannels (FIRST_PROBE_MS=250, MIN_PROBABILITY=0.45)",
    )
    parser.add_argument(
        "--probe-retry-penalty",
        type=float,
        default=None,
        help="repetition penalty of a rejected probe's second decode (Whisper's default: 1.3; 1.0: no "
        "second decode, as before 28f6f94)",
    )
    parser.add_argument(
        "--turn-detector",
        choices=("silence", "smart_turn"),
        default="silence",
        help="how the held turn ends: after 500 ms of silence (as before), or Smart Turn at ~192 ms (a call's)",
    )
    parser.add_argument("--two-part", type=int, default=None, metavar="PAUSE_MS", help="two clips, this pause between")
    args = parser.parse_args()
    for assignment in args.set:
        name, _, value = assignment.partition("=")
        module = next(m for m in (bargein, backchannels) if hasattr(m, name))
        setattr(module, name, type(getattr(module, name))(value))
    config = GatewayConfig()
    print_decode_speed(config)
    vad, stt = (
        SileroVad(),
        WhisperSpeechToText(config.stt_model, Path(config.model_cache_dir), threads=config.stt_threads),
    )
    if args.probe_retry_penalty is not None:
        stt.retry_repetition_penalty = args.probe_retry_penalty
    print(f"probe retry repetition penalty: {stt.retry_repetition_penalty:g} (1 = no retry)")
    settings = CallSettings.defaults(config)
    end_of_turn = None
    if args.turn_detector == "smart_turn":
        from gateway.models.smart_turn import SmartTurnDetector

        end_of_turn = SmartTurnDetector()
    print(f"turn detector: {args.turn_detector}" + (f"; two parts, {args.two_part} ms apart" if args.two_part else ""))
    chosen = list(clips(args.split, tuple(args.voice)))
    if args.two_part is not None:
        chosen = two_part_clips(chosen, args.two_part)
    outcomes = []
    for clip in chosen:
        outcome = run_clip(clip, vad, stt, settings, end_of_turn)
        outcomes.append(outcome)
        right = (outcome.decision == "kept") == (clip.kind == BACKCHANNEL)
        when = f"{outcome.decided_ms:5.0f}" if outcome.decided_ms is not None else "    -"
        if isinstance(clip, PairClip) and outcome.own_ms is not None:
            when += f" ({outcome.own_ms:.0f} after its second part)"
        line = (
            f"{'ok ' if right else 'BAD'} {clip.split:<8} {clip.kind:<12} {outcome.decision:<11} {when} ms  {clip.name}"
        )
        if args.verbose:
            line += f"  {' | '.join(outcome.probes)}  => {'; '.join(outcome.decided)}"
            line += f" (joined {outcome.joined})" if outcome.joined else ""
        print(line, flush=True)
    report(outcomes)
    probes = sum(len(outcome.probe_ms) for outcome in outcomes)
    print(f"probes decoded again (rejected first decode): {stt.retries} of {probes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
