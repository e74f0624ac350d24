"""Barge-in that understands words: caller speech under the assistant's audio pauses it, and what
was said decides whether the answer is cancelled or goes on.

A person who says "yeah" or "mm-hmm" while someone talks is listening, not taking the turn. So when
server VAD confirms speech while reply audio plays (and ``turn_detection.interrupt_response`` holds),
the VAD stage does not barge in at once: it pauses playback (``StageContext.pause_reply``) and holds
the turn (no ``speech_started`` yet) while :class:`BargeInDecider` decides:

- the speech goes on for ``max_backchannel_ms`` -> **interrupt** (no backchannel is that long);
- at its first pause of :data:`PROBE_PAUSE_MS` (or at the end of the turn) the speech so far is
  transcribed once (a *probe*, the turn's speculative STT); its words, backchannels (``yeah``,
  ``mm-hmm``, ``okay``... :data:`BACKCHANNELS`) left out, number at least
  ``min_interruption_words`` -> **interrupt**, else (a backchannel, a cough, a noise with no words)
  -> **resume**;
- no words by ``false_interruption_timeout_ms`` after the speech began -> **resume** (a late answer
  that has words can still interrupt, as long as the turn is held).

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
import re
from dataclasses import dataclass
from typing import Optional

# Pause in the held speech after which it is transcribed (a probe), ms: 3 VAD chunks of 32 ms.
PROBE_PAUSE_MS = 96

# Words and phrases that say "I am listening" (and Whisper's spellings of them). Matched after
# lower-casing and dropping punctuation; phrases of two words are matched before single words.
BACKCHANNELS = frozenset(
    {
        "yeah", "yes", "yep", "yup", "ya", "yah", "ok", "okay", "kay", "right", "sure", "alright",
        "mm", "mmm", "hm", "hmm", "mhm", "mmhmm", "mm-hmm", "mm-hm", "hmm-mm", "uh-huh", "uhhuh", "uh",
        "um", "ah", "oh", "aha", "ha", "huh", "wow", "cool", "nice", "great", "indeed", "exactly",
        "true", "totally", "absolutely", "definitely", "gotcha", "i see", "got it", "all right",
        "uh huh", "mm hmm", "oh yeah", "oh okay", "oh ok", "oh right", "yeah yeah", "okay okay",
    }
)  # fmt: skip
# Whisper's rendering of a sound with no words: "(coughs)", "[Music]", "*sigh*", "...".
_NON_SPEECH = re.compile(r"\([^)]*\)|\[[^\]]*\]|\*[^*]*\*")
_WORD = re.compile(r"[a-z0-9']+(?:-[a-z0-9']+)*")


def interrupting_words(transcript: str) -> list[str]:
    """The words of ``transcript`` that are not backchannels (lower case, in order); [] for a
    backchannel, a noise Whisper wrote as ``(coughs)`` / ``[Music]``, or an empty text."""
    words = _WORD.findall(_NON_SPEECH.sub(" ", transcript.lower()))
    left: list[str] = []
    index = 0
    while index < len(words):
        pair = " ".join(words[index : index + 2])
        if index + 1 < len(words) and pair in BACKCHANNELS:
            index += 2
            continue
        if words[index] not in BACKCHANNELS:
            left.append(words[index])
        index += 1
    return left


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
    ``min_interruption_words`` 0 turns the decision off (any speech interrupts at once)."""

    min_interruption_words: int = 1
    max_backchannel_ms: int = 600
    false_interruption_timeout_ms: int = 1000

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
    answered: bool = False  # the last probe's words are known
    transcript: str = ""
    voiced_after_probe: bool = False
    probed_this_pause: bool = False
    ended: bool = False  # the VAD ended the turn (its commit is held)


class BargeInDecider:
    """Decides one held turn at a time (the VAD stage's, on its thread); ``rate`` in Hz.

    The stage calls :meth:`begin` when a turn starts under playing reply audio, :meth:`on_chunk`
    for each VAD chunk of the held turn, :meth:`probe_sent` when it sent a probe, :meth:`heard`
    with a probe's text, and :meth:`turn_ended` when the VAD ends the turn. Each returns the
    :class:`Action` to carry out. ``held`` is True while a turn is held; ``transcript`` the last
    probe's text.
    """

    def __init__(self, rate: int) -> None:
        self._rate = rate
        self._held: Optional[_Held] = None

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
    def transcript(self) -> str:
        return self._held.transcript if self._held is not None else ""

    @property
    def start(self) -> int:
        return self._held.start if self._held is not None else 0

    def clear(self) -> None:
        """Forget the held turn (it was reported, dropped, or the input was cleared)."""
        self._held = None

    def begin(self, start: int, rules: BargeInRules) -> None:
        """A turn starting at ``start`` is held and the reply was paused."""
        self._held = _Held(start=start, rules=rules)

    def _ms(self, samples: int) -> float:
        return samples * 1000 / self._rate

    def on_chunk(self, position: int, voiced: bool, silence: int) -> Action:
        """One chunk of the held turn ending at ``position``: ``voiced`` (speech), ``silence`` the
        samples of the pause it is in (0 while voiced)."""
        held = self._held
        if held is None:
            return Action.NONE
        if held.ended:
            return self._timeout(position)
        if voiced:
            held.probed_this_pause = False
            if held.probe and position > held.probe_cut:
                held.voiced_after_probe = True
            if self._ms(position - held.start) >= held.rules.max_backchannel_ms:
                return Action.INTERRUPT
            if not held.paused and held.voiced_after_probe:
                held.paused = True  # more words after a resume: hold the reply again, decide again
                held.answered = False
                return Action.REPAUSE
            return Action.NONE
        if (
            self._ms(silence) >= PROBE_PAUSE_MS
            and not held.probed_this_pause
            and (held.probe == 0 or held.voiced_after_probe)
        ):
            held.probed_this_pause = True
            return Action.PROBE
        return self._timeout(position)

    def _timeout(self, position: int) -> Action:
        held = self._held
        assert held is not None
        if held.paused and self._ms(position - held.start) >= held.rules.false_interruption_timeout_ms:
            held.paused = False  # no words in time: a false interruption, the reply goes on
            return Action.RESUME
        return Action.NONE

    def probe_sent(self, number: int, cut: int) -> None:
        """Probe ``number`` covers the speech up to ``cut``."""
        if self._held is not None:
            self._held.probe, self._held.probe_cut = number, cut
            self._held.answered = False
            self._held.voiced_after_probe = False

    def turn_ended(self) -> Action:
        """The VAD ended the held turn (its commit waits). A turn never probed is probed now; one
        whose words are known is decided now (a backchannel is dropped)."""
        held = self._held
        if held is None:
            return Action.NONE
        held.ended = True
        if held.probe == 0 or held.voiced_after_probe:
            return Action.PROBE
        if held.answered:
            return self._decide()
        return Action.NONE

    def heard(self, number: int, transcript: str) -> Action:
        """Probe ``number``'s text; an older probe's is ignored."""
        held = self._held
        if held is None or number != held.probe:
            return Action.NONE
        held.answered = True
        held.transcript = transcript
        if held.voiced_after_probe and not held.ended:
            return Action.NONE  # the caller went on: wait for the probe of the whole speech
        return self._decide()

    def _decide(self) -> Action:
        held = self._held
        assert held is not None
        if len(interrupting_words(held.transcript)) >= held.rules.min_interruption_words:
            return Action.INTERRUPT
        was_paused, held.paused = held.paused, False
        if held.ended:
            return Action.RESUME  # the stage drops the held turn
        return Action.RESUME if was_paused else Action.NONE
