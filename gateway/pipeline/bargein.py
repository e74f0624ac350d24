"""Barge-in decided by words, as they come: caller speech under the assistant's audio pauses it,
and what was said decides whether the answer is cancelled or goes on.

A person who says "yeah" or "mm-hmm" while someone talks is listening, not taking the turn. So when
server VAD confirms speech while reply audio plays (and ``turn_detection.interrupt_response`` holds),
the VAD stage does not barge in at once: it pauses playback (``StageContext.pause_reply``) and holds
the turn (no ``speech_started`` yet) while :class:`BargeInDecider` decides, as soon as the words are
known:

- the speech so far is transcribed again and again while it goes on (a *probe*, the turn's
  speculative STT: the first once :data:`FIRST_PROBE_MS` of speech is in, then each time the last
  answer is back and :data:`PROBE_EVERY_MS` more was said, and once more at its first pause of
  :data:`PROBE_PAUSE_MS` or at the end of the turn); each answer comes with its words'
  probabilities, and a word the last answer heard at the same place counts as sure enough
  (``backchannels.agreed``: two decodes agree, though each was unsure);
- words that ask for the turn (``gateway.pipeline.backchannels.judge``: a cue word such as "wait"
  or "what" the decoder is sure of, a command word no backchannel is heard as, such as "stop" or
  "excuse", even unsure, or two different sure words off the backchannel list), at
  least ``min_interruption_words`` of them -> **interrupt**, at once, even mid-speech;
- the speech over (a pause, or the end of the turn): its words all backchannels, sounds or noise
  -> **resume**; few short words off the list with no cue and no question (a backchannel Whisper
  spelled as other words) -> **resume** once the turn ended (at a pause the caller may go on:
  "Hold on, what about tomorrow?" paused after an unsure "Hold on"); anything else -> **interrupt**,
  unsure words included (an unsure "Wait" under the assistant's echo is still no backchannel);
- a probe whose decode Whisper does not trust (it looped, hit its token cap, or heard nothing in
  clearly voiced audio: ``ScoredTranscript.trusted``) decides nothing: the next probe, the length
  or the timeout does;
- the held speech reaches ``max_backchannel_ms`` -> **interrupt** whatever its words (no
  backchannel is that long: natural ones last 0.5-1 s). Its length, for this rule, for
  :data:`LONG_SPEECH_MS` and for the shape rule (``backchannels.judge``'s ``voiced_ms``), is its
  *speech*: its voiced chunks and the dips shorter than :data:`PROBE_PAUSE_MS` between them, not the
  wall time from its onset: a pause inside one held turn ("Okay." 350 ms "okay.", a pause the VAD
  did not end the turn at) is no speech. Before, it counted, and such a pair reached the bound
  at ~1.5 s from its onset with ~1 s said (h41);
- no decision ``false_interruption_timeout_ms`` after the speech began, in a pause -> **resume**,
  but never over :data:`LONG_SPEECH_MS` of voiced speech (that **interrupts**);
- a probe's answer still awaited then (the machine too busy to transcribe the overlap in time):
  the reply stays paused for it up to :data:`STARVED_TIMEOUTS` timeouts after the onset; then what
  is known decides: the words of an earlier answer judged as the whole speech, or voiced speech of
  :data:`LONG_SPEECH_MS` -> **interrupt**; else **resume**, and the turn stays held (ended or not)
  until the answer comes: its words can still interrupt, late, rather than never;
- the VAD ended the held turn at a pause ("Yeah..." then "yeah.", "Wait," then "stop.": the semantic
  model may call the first part complete) and the caller speaks again before it was decided: the
  second part joins it (:meth:`BargeInDecider.goes_on`), one overlap decided by the words of both;
  the pause between the parts counts as no speech for the length rules (as any pause) and the timeout. Before, the
  second part's start released the first as an interruption with no words known (h40).

Interrupt: the held turn is reported as it happened (``speech_started`` with its true
``audio_start_ms``, then the usual cancel and truncation to what was heard). Resume: playback goes
on where it paused, the turn is dropped (no event, no input item, no response: it was not a turn),
and only the gateway extension event ``gateway.barge_in`` says what was heard. Speech that starts
again after a resume, before the turn ended, pauses the reply again and is decided again, whole.

This module is pure (no threads, no models): the VAD stage feeds it audio positions and probe
answers and carries out the :class:`Action` it returns. LiveKit Agents' ``false_interruption_timeout``
and ``min_interruption_words`` (``voice/agent_activity.py``) were the model for the knobs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional

from gateway.models.base import HeardWord
from gateway.pipeline.backchannels import Verdict, agreed, judge, without_echo

# Speech heard before the first probe, ms (from its onset), and speech between two probes while it
# goes on (each also waits for the last answer: one probe at a time).
FIRST_PROBE_MS = 200
PROBE_EVERY_MS = 160
# Pause in the held speech after which it is transcribed whole (a final probe), ms: 3 VAD chunks.
PROBE_PAUSE_MS = 96
# Audio a probe holds before the speech's onset when that is the reply's own echo (a leg without
# echo cancellation), ms; the turn keeps its whole ``prefix_padding_ms``. With all 288 ms of echo
# Whisper wrote the echo, or one stray word, for the caller's clear "Wait, stop." ("your" in every
# probe: the answer resumed). A prefix that is no echo is kept whole: cut to 100 ms, soft onsets
# went ("Sorry to cut in." heard "Soak it in" and kept, on the corpus's fresh3 set).
PROBE_PREFIX_MS = 100
# Speech (the held turn's voiced chunks and the dips shorter than PROBE_PAUSE_MS between them, ms)
# over which a timeout never resumes the reply, whatever ``max_backchannel_ms`` says: no backchannel
# is that long (issue 29: "length alone may cancel past ~1.5 s of speech").
LONG_SPEECH_MS = 1500
# Timeouts (``false_interruption_timeout_ms`` each, from the onset) the reply waits paused for a probe's
# answer in flight before what is known decides. Before, the answer's absence decided "resume" there
# and the held turn was dropped: a "Stop, stop." under load was talked over (h38's starved probe).
STARVED_TIMEOUTS = 3


class Action(enum.Enum):
    """What the VAD stage must do for a held turn."""

    NONE = "none"
    PROBE = "probe"  # transcribe the speech so far (a speculative utterance marked as a probe)
    INTERRUPT = "interrupt"  # report the held speech_started: the unit cancels the reply
    RESUME = "resume"  # play the reply on; the turn is dropped when it ends
    REPAUSE = "repause"  # the caller spoke again after a resume: pause the reply again


@dataclass(frozen=True)
class BargeInRules:
    """The knobs (``turn_detection``, ms at the VAD's sample rate): see the module docstring.
    ``min_interruption_words`` 0 turns the decision off (any speech interrupts at once);
    ``language`` picks the backchannel list."""

    min_interruption_words: int = 1
    max_backchannel_ms: int = 1500
    false_interruption_timeout_ms: int = 1000
    language: str = "en"

    @property
    def enabled(self) -> bool:
        return self.min_interruption_words > 0


@dataclass
class _Held:
    """One held turn. Positions are samples of the call's input stream."""

    start: int  # where the speech began (the turn's audio_start)
    rules: BargeInRules
    paused: bool = True  # the reply is paused (False once resumed)
    probe: int = 0  # number of the last probe sent (0: none yet)
    probe_cut: int = 0  # position up to which it heard
    in_flight: bool = False  # the last probe's answer is not back yet
    answered: bool = False  # the last probe's words are known
    transcript: str = ""
    words: tuple[HeardWord, ...] = field(default_factory=tuple)  # the last answer's, the reply's echo left out
    heard_words: tuple[HeardWord, ...] = field(default_factory=tuple)  # the last trusted answer's, all
    voiced_end: int = 0  # end of the last voiced chunk
    voiced_after_probe: bool = False
    probed_this_pause: bool = False
    settled: bool = False  # the last answer, covering all the speech, was decided
    shaped: bool = False  # it was words of a backchannel's shape at a pause: the turn's end decides
    ended: bool = False  # the VAD ended the turn (its commit is held)
    gap: int = 0  # samples of the pauses between its parts (a part that joined after the turn ended)
    speech: int = 0  # samples of its speech: voiced chunks and the dips < PROBE_PAUSE_MS between them
    onset: Optional[int] = None  # where a part began whose first voiced chunk is still to come


class BargeInDecider:
    """Decides one held turn at a time (the VAD stage's, on its thread); ``rate`` in Hz.

    The stage calls :meth:`begin` when a turn starts under playing reply audio, :meth:`on_chunk`
    for each VAD chunk of the held turn, :meth:`probe_sent` when it sent a probe, :meth:`heard`
    with a probe's answer, and :meth:`turn_ended` when the VAD ends the turn. Each returns the
    :class:`Action` to carry out. ``held`` is True while a turn is held; ``transcript`` the last
    probe's text.
    """

    def __init__(self, rate: int) -> None:
        self._rate = rate
        self._held: Optional[_Held] = None
        self._position = 0  # end of the last chunk seen
        self._silence = 0  # samples of the pause it is in (0 while voiced)

    @property
    def held(self) -> bool:
        return self._held is not None

    @property
    def paused(self) -> bool:
        """True while the held turn keeps the reply paused."""
        return self._held is not None and self._held.paused

    @property
    def ended(self) -> bool:
        """True once the VAD ended the held turn (its commit waits for the decision)."""
        return self._held is not None and self._held.ended

    @property
    def awaiting(self) -> bool:
        """True while the held turn's last probe is not answered: a resumed, ended turn stays held
        for it (its words may still interrupt)."""
        return self._held is not None and self._held.in_flight

    @property
    def transcript(self) -> str:
        return self._held.transcript if self._held is not None else ""

    @property
    def start(self) -> int:
        return self._held.start if self._held is not None else 0

    @property
    def probe(self) -> int:
        """Number of the held turn's last probe (0: none)."""
        return self._held.probe if self._held is not None else 0

    @property
    def probe_cut(self) -> int:
        """Position up to which the last probe heard."""
        return self._held.probe_cut if self._held is not None else 0

    def clear(self) -> None:
        """Forget the held turn (it was reported, dropped, or the input was cleared)."""
        self._held = None

    def begin(self, start: int, rules: BargeInRules) -> None:
        """A turn starting at ``start`` is held and the reply was paused."""
        self._held = _Held(start=start, rules=rules, onset=start)

    def _ms(self, samples: int) -> float:
        return samples * 1000 / self._rate

    def _spoken_ms(self, held: _Held, position: int) -> float:
        """ms from the held speech's onset to ``position``, the pauses between its parts left out
        (the timeout's clock)."""
        return self._ms(position - held.start - held.gap)

    def _speech_ms(self, held: _Held) -> float:
        """ms of the held speech so far (the length rules'): pauses inside it left out."""
        return self._ms(held.speech)

    def _count_speech(self, held: _Held, position: int, previous: int) -> None:
        """A voiced chunk from ``previous`` to ``position``: a part's first (from its onset, the
        chunks that made it speech included), or one after the last voiced chunk, with the dip
        between them when shorter than :data:`PROBE_PAUSE_MS` (a pause that long is no speech)."""
        if held.onset is not None:
            held.speech += position - held.onset
            held.onset = None
            return
        dip = max(0, previous - held.voiced_end)
        held.speech += position - previous + (dip if self._ms(dip) < PROBE_PAUSE_MS else 0)

    def goes_on(self, onset: int) -> Action:
        """The caller spoke again from ``onset`` after the VAD ended the held turn, before it was
        decided: this speech is more of the same overlap (the stage joins its audio to the held
        turn's), decided whole; the pause between the parts is no speech."""
        held = self._held
        if held is None:
            return Action.NONE
        held.gap += max(0, onset - max(held.voiced_end, held.start))
        held.ended = False
        held.probed_this_pause = False
        held.onset = onset
        return Action.NONE

    def on_chunk(self, position: int, voiced: bool, silence: int) -> Action:
        """One chunk of the held turn ending at ``position``: ``voiced`` (speech), ``silence`` the
        samples of the pause it is in (0 while voiced)."""
        previous, self._position, self._silence = self._position, position, silence
        held = self._held
        if held is None:
            return Action.NONE
        if held.ended:
            return self._timeout(position)
        if voiced:
            self._count_speech(held, position, previous)
            return self._voiced(held, position)
        if self._ms(silence) < PROBE_PAUSE_MS:
            return self._timeout(position)
        if (held.probe == 0 or held.voiced_after_probe) and not held.probed_this_pause and not held.in_flight:
            held.probed_this_pause = True
            return Action.PROBE  # the speech paused: hear all of it
        if held.answered and not held.voiced_after_probe and not held.settled:
            return self._decide()  # the last answer covers all the speech: it is final now
        return self._timeout(position)

    def _voiced(self, held: _Held, position: int) -> Action:
        held.probed_this_pause = False
        held.voiced_end = position
        if held.probe and position > held.probe_cut:
            held.voiced_after_probe = True
            held.settled = False
        if self._speech_ms(held) >= held.rules.max_backchannel_ms:
            return Action.INTERRUPT
        if not held.paused and held.voiced_after_probe:
            held.paused = True  # more words after a resume: hold the reply again, decide again
            held.answered = False
            return Action.REPAUSE
        return self._next_probe(held, position)

    def _next_probe(self, held: _Held, position: int) -> Action:
        """PROBE when the speech goes on, no probe is out and enough was said since the last."""
        since = position - (held.probe_cut if held.probe else held.start)
        enough = PROBE_EVERY_MS if held.probe else FIRST_PROBE_MS
        if not held.in_flight and self._ms(since) >= enough and (held.probe == 0 or held.voiced_after_probe):
            return Action.PROBE
        return Action.NONE

    def _timeout(self, position: int) -> Action:
        held = self._held
        assert held is not None
        if not held.paused:
            # Resumed with its answer awaited (a starved probe): once the turn ended and no answer is
            # awaited any more (an untrusted one came), it is dropped.
            return Action.RESUME if held.ended and not held.in_flight else Action.NONE
        if held.shaped and not held.ended:
            return Action.NONE  # words of a backchannel's shape: the turn's end decides
        timeout = held.rules.false_interruption_timeout_ms * (STARVED_TIMEOUTS if held.in_flight else 1)
        if self._spoken_ms(held, position) < timeout:
            return Action.NONE
        if self._speech_ms(held) >= LONG_SPEECH_MS:
            return Action.INTERRUPT  # no backchannel is that long, whatever was (not) heard
        if held.in_flight and held.words and self._judge(held, complete=True) is Verdict.TURN:
            return Action.INTERRUPT  # starved: an earlier answer's words, the speech now over, ask for the turn
        held.paused = False  # no decision in time: a false interruption, the reply goes on
        return Action.RESUME

    def probe_sent(self, number: int, cut: int) -> None:
        """Probe ``number`` covers the speech up to ``cut``."""
        if self._held is not None:
            held = self._held
            held.probe, held.probe_cut, held.in_flight = number, cut, True
            held.answered = False
            held.voiced_after_probe = False
            held.settled = False
            held.shaped = False

    def turn_ended(self) -> Action:
        """The VAD ended the held turn (its commit waits). A turn never probed, or with speech after
        its last probe, is probed now (once the probe out is back); one whose words are known is
        decided now (a backchannel is dropped)."""
        held = self._held
        if held is None:
            return Action.NONE
        held.ended = True
        if held.in_flight:
            return Action.NONE  # heard() decides, or asks for the whole turn
        if held.probe == 0 or held.voiced_after_probe:
            return Action.PROBE
        if not held.answered:
            return Action.NONE  # the last answer was not trusted: the timeout decides
        return self._decide()

    def heard(
        self,
        number: int,
        transcript: str,
        words: tuple[HeardWord, ...] = (),
        trusted: bool = True,
        echo: tuple[str, ...] = (),
    ) -> Action:
        """Probe ``number``'s answer (its words with their probabilities; none given: the words of
        ``transcript``, each sure); an older probe's is ignored. An answer not ``trusted`` decides
        nothing: the speech goes on to the next probe, the length rule or the timeout. ``echo``: the
        reply's words played while the probe's audio was picked up; heard words among them are the
        assistant's own echo and count for nothing (``backchannels.without_echo``)."""
        held = self._held
        if held is None or number != held.probe:
            return Action.NONE
        held.in_flight = False
        held.transcript = transcript
        if not trusted:
            return self._next_probe(held, self._position) if not held.ended else Action.NONE
        held.answered = True
        held.heard_words = agreed(held.heard_words, words or tuple(HeardWord(word) for word in transcript.split()))
        held.words, _ = without_echo(held.heard_words, echo)
        complete = not held.voiced_after_probe and (held.ended or self._ms(self._silence) >= PROBE_PAUSE_MS)
        if complete:
            return self._decide()
        if self._interrupts(held, complete=False):
            return Action.INTERRUPT
        if held.ended or self._ms(self._silence) >= PROBE_PAUSE_MS:
            held.probed_this_pause = True
            return Action.PROBE  # the caller went on, then paused: hear all of it
        return self._next_probe(held, self._position)

    def _interrupts(self, held: _Held, complete: bool) -> bool:
        return self._judge(held, complete) is Verdict.TURN

    def _judge(self, held: _Held, complete: bool) -> Verdict:
        """The word test's verdict (``backchannels.judge``); TURN only with ``min_interruption_words``."""
        verdict, words = judge(
            held.words,
            held.rules.language,
            complete=complete,
            voiced_ms=self._speech_ms(held),
            question="?" in held.transcript,
        )
        if verdict is Verdict.TURN and len(words) < held.rules.min_interruption_words:
            return Verdict.SHAPED
        return verdict

    def _decide(self) -> Action:
        """The last answer covers all the speech: interrupt, or resume (drop it once ended)."""
        held = self._held
        assert held is not None
        held.settled = True
        verdict = self._judge(held, complete=True)
        if verdict is Verdict.TURN:
            return Action.INTERRUPT
        if verdict is Verdict.SHAPED and not held.ended and held.paused:
            held.shaped = True  # resumed once the turn ends (turn_ended decides again)
            return Action.NONE
        was_paused, held.paused = held.paused, False
        if held.ended:
            return Action.RESUME  # the stage drops the held turn
        return Action.RESUME if was_paused else Action.NONE
