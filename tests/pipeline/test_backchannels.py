"""The word test of barge-in (gateway.pipeline.backchannels): backchannels as Whisper base actually
writes them in voices it does not know are no interruption; words that ask for the turn are, when the
decoder was sure of them."""

from __future__ import annotations

import pytest

from gateway.models.base import HeardWord
from gateway.pipeline.backchannels import (
    ENGLISH,
    SHAPE_MAX_MS,
    VOCABLES,
    Verdict,
    _is_backchannel_word,
    agreed,
    canonical,
    interrupting_words,
    judge,
    without_echo,
)


@pytest.mark.parametrize(
    "heard",
    [
        "Hmm.",  # "Mm-hmm."
        "M-M-H-M",  # "Mm-hmm."
        "MMHMHM",  # "Mm-hmm." heard as "M.M.H.M.H.M" (a word once its dots are gone)
        "Oh,",  # "Uh-huh."
        "YAHO YAHO",  # "Yeah, yeah."
        "Yeah, yeah, yeah.",
        "Ye He",  # "Yeah."
        "Yeh",
        "Ice.",  # "I see."
        "God it.",  # "Got it."
        "oh ok",
        "All right.",
        "alright",
        "Mm-hmm, okay, I see.",
        "Uh huh, got it.",
        "(coughs)",
        "[Music]",
        "",
        "you",  # what Whisper writes for a breath
    ],
)
def test_backchannels_as_whisper_writes_them_do_not_interrupt(heard: str) -> None:
    assert interrupting_words(heard) == []


@pytest.mark.parametrize(
    ("heard", "words"),
    [
        ("Wait, stop.", ["wait", "stop"]),
        ("No, no, stop.", ["no", "no", "stop"]),
        ("Hold on, what about tomorrow?", ["hold", "on", "what", "about", "tomorrow"]),
        ("Yeah, but what about Paris?", ["but", "what", "about", "paris"]),
        ("Excuse me", ["excuse", "me"]),
        ("No.", ["no"]),
    ],
)
def test_words_that_ask_for_the_turn_interrupt(heard: str, words: list[str]) -> None:
    assert interrupting_words(heard) == words


def test_unsure_words_do_not_interrupt_and_a_cut_off_last_word_needs_more() -> None:
    # Whisper's guesses at a sound it does not know come with low probabilities.
    assert interrupting_words([HeardWord("Chair", 0.2)]) == []
    assert interrupting_words([HeardWord("Stop", 0.5)]) == ["stop"]
    # While the caller still speaks the last word may be a piece of a longer one.
    assert interrupting_words([HeardWord("Stop", 0.5)], complete=False) == []
    assert interrupting_words([HeardWord("Wait", 0.8), HeardWord("sto", 0.5)], complete=False) == ["wait"]
    # "I" may become "I see": a last word that begins a backchannel phrase never counts.
    assert interrupting_words([HeardWord("Okay"), HeardWord("I")], complete=False) == []


def test_other_languages_have_their_own_list_and_share_the_sounds() -> None:
    assert interrupting_words("Oui, d'accord.", language="fr") == []
    assert interrupting_words("Ja, genau.", language="de-DE") == []
    assert interrupting_words("Mhm.", language="xx") == []
    assert interrupting_words("Attendez, arrêtez.", language="fr") == ["attendez", "arrêtez"]


def test_canonical_form_writes_each_run_of_a_letter_once() -> None:
    assert canonical("Mmm-hmm") == "mhm"
    assert canonical("YAHOO!") == "yaho"


@pytest.mark.parametrize(
    ("heard", "voiced_ms"),
    [
        ([HeardWord("Always", 0.7)], 700),  # "Oh, I see." as Whisper base wrote it in an unknown voice
        ([HeardWord("Yasuo", 0.6)], 500),  # "Yes."
        ([HeardWord("Hoyas", 0.4), HeardWord("Hoyas", 0.9), HeardWord("Hoyas", 0.9)], 700),  # repeated: once
        ([HeardWord("O-I-C", 0.6)], 800),  # one word spelled out
        ([HeardWord("Wait", 0.39)], 450),  # "Right.": an unsure cue in speech this short
        ([HeardWord("Chair", 0.1), HeardWord("Xion", 0.1), HeardWord("ma", 0.1)], 600),  # noise guesses
    ],
)
def test_few_short_words_off_the_list_are_a_backchannel_by_their_shape(
    heard: list[HeardWord], voiced_ms: float
) -> None:
    shaped = any(word.probability >= 0.2 for word in heard)  # else all noise guesses: nothing off the list
    assert judge(heard, voiced_ms=voiced_ms) == (Verdict.SHAPED if shaped else Verdict.BACKCHANNEL, [])


@pytest.mark.parametrize(
    ("heard", "voiced_ms", "question"),
    [
        ([HeardWord("Wait", 0.35), HeardWord("stop", 0.3)], 800, False),  # unsure, under the echo
        ([HeardWord("Where's", 0.39), HeardWord("the", 0.9)], 830, False),  # a cue with its contraction
        ([HeardWord("x", 0.6)], 900, True),  # "Excuse me?"
        ([HeardWord("Tell", 0.9), HeardWord("me", 0.9), HeardWord("more", 0.3)], 900, False),  # three words
        ([HeardWord("10", 0.4), HeardWord("of", 0.7)], 700, False),  # a number
        ([HeardWord("Always", 0.7)], SHAPE_MAX_MS + 100, False),  # too long for a backchannel
    ],
)
def test_cues_questions_and_more_words_than_a_backchannel_has_ask_for_the_turn(
    heard: list[HeardWord], voiced_ms: float, question: bool
) -> None:
    verdict, words = judge(heard, voiced_ms=voiced_ms, question=question)
    assert verdict is Verdict.TURN and words


def test_while_the_caller_speaks_a_sure_cue_or_two_sure_words_decide_else_hear_more() -> None:
    assert judge([HeardWord("Stop", 0.7)], complete=False, voiced_ms=300)[0] is Verdict.TURN
    assert judge([HeardWord("Go", 0.6), HeardWord("forward", 0.8)], complete=False, voiced_ms=500)[0] is Verdict.TURN
    # One sure word off the list may be a misspelled backchannel; an unsure cue may be "Right".
    assert judge([HeardWord("Always", 0.8)], complete=False, voiced_ms=500)[0] is Verdict.UNDECIDED
    assert judge([HeardWord("What", 0.45)], complete=False, voiced_ms=300)[0] is Verdict.UNDECIDED
    assert judge([HeardWord("Okay", 0.9)], complete=False, voiced_ms=300)[0] is Verdict.UNDECIDED


@pytest.mark.parametrize(
    "heard", ["Mm-hmm, keep going", "Okay, go ahead", "Yeah, carry on", "Go ahead", "Uh-huh, go on"]
)
def test_a_continuer_keeps_the_answer_going_even_while_the_caller_speaks(heard: str) -> None:
    # "Mm-hmm, keep going." asks for more of the answer. Before, "keep" and "going" were two sure
    # words off the list: the answer was cut mid-speech.
    words = [HeardWord(word, 0.9) for word in heard.replace(",", "").split()]
    assert judge(words, complete=False, voiced_ms=700)[0] is Verdict.UNDECIDED
    assert judge(words, voiced_ms=900) == (Verdict.BACKCHANNEL, [])
    assert interrupting_words(heard) == []


def test_each_language_lists_its_continuers() -> None:
    assert interrupting_words("Oui, vas-y.", language="fr") == []
    assert interrupting_words("Ja, mach weiter.", language="de") == []
    assert interrupting_words("Sí, sigue.", language="es") == []


def test_words_the_reply_played_are_its_echo_whatever_their_case_and_punctuation() -> None:
    heard = [HeardWord("Fearless,", 0.25), HeardWord("weight", 0.41), HeardWord("Stop!", 0.65)]
    kept, echoed = without_echo(heard, "was a fierce and fearless dragon.".split())
    assert [w.text for w in kept] == ["weight", "Stop!"] and [w.text for w in echoed] == ["Fearless,"]
    assert without_echo(heard, ()) == (tuple(heard), ())
    # One edit from a word of 4 letters or more ("Elara" heard "Alara"); a short word must be the same.
    kept, echoed = without_echo([HeardWord("Alara"), HeardWord("an")], ["Elara", "a"])
    assert [w.text for w in kept] == ["an"] and [w.text for w in echoed] == ["Alara"]
    # A cut-off or lengthened echo of a word of 4 letters or more (heard in real calls).
    kept, echoed = without_echo([HeardWord("Fear"), HeardWord("Fearlessly"), HeardWord("stop")], ["fearless", "to"])
    assert [w.text for w in kept] == ["stop"] and [w.text for w in echoed] == ["Fear", "Fearlessly"]


@pytest.mark.parametrize(
    ("heard", "voiced_ms"),
    [
        ([HeardWord("Weight.", 0.62)], 400),  # "Wait." in the tests' caller voice (real calls: 0.41-0.83)
        ([HeardWord("your", 0.2), HeardWord("weight", 0.41)], 800),  # "Wait, stop." over the echo
        ([HeardWord("Whiz", 0.41)], 700),  # "Wait" (Kokoro jf_alpha)
        ([HeardWord("Stalk", 0.33), HeardWord("Datsunov", 0.33)], 900),  # "Stop, that's enough." (jf_alpha)
        ([HeardWord("Holder", 0.54)], 500),  # "Hold" (jm_kumo)
        ([HeardWord("nose", 0.43)], 650),  # the second "no" of "No, no," (jm_kumo)
    ],
)
def test_whispers_spellings_of_a_cue_word_ask_for_the_turn(heard: list[HeardWord], voiced_ms: float) -> None:
    # Whisper base writes the caller's "Wait" as "weight" (p 0.41-0.83): no cue word, one word of a
    # backchannel's shape, so "Wait." alone resumed the answer. Before: SHAPED.
    verdict, words = judge(heard, voiced_ms=voiced_ms)
    assert verdict is Verdict.TURN and words


def test_no_backchannel_holds_a_cue_spelling() -> None:
    # A spelling is matched exactly and never fuzzily: none is a backchannel word, phrase or sound,
    # nor within the backchannel list's one-edit reach (it would be taken for a backchannel first).
    phrase_words = {word for phrase in ENGLISH.phrase_forms for word in phrase}
    for spelling in ENGLISH.cue_spellings:
        form = canonical(spelling)
        assert not _is_backchannel_word(form, ENGLISH) and not VOCABLES.match(form), spelling
        assert form not in phrase_words, spelling
        assert judge([HeardWord(spelling, 0.9)], voiced_ms=500)[0] is Verdict.TURN, spelling


@pytest.mark.parametrize(
    "heard",
    [
        [HeardWord("Stop", 0.45)],  # "Stop, that's enough." (Kokoro jf_gongitsune), the first probe
        [HeardWord("Stop", 0.46)],  # "Stop." (jm_kumo slow)
        [HeardWord("Excuse", 0.37)],  # "Excuse me?" (jf_nezumi), the second probe
        [HeardWord("Hold", 0.31)],  # "Hold on, please." (jf_nezumi + jf_gongitsune, slow)
    ],
)
def test_an_unsure_command_word_asks_for_the_turn_while_the_caller_still_speaks(heard: list[HeardWord]) -> None:
    # The first probes hear a command said in a voice Whisper knows badly unsure, and sure only
    # 200-400 ms later. Before: UNDECIDED (a cue needed 0.5 while the caller spoke), decided at
    # 838-1062 ms after the onset by the next probe's sure word.
    verdict, words = judge(heard, complete=False, voiced_ms=350)
    assert verdict is Verdict.TURN and words == [heard[0].text.lower()]


@pytest.mark.parametrize(
    "heard",
    [
        HeardWord("No", 0.44),  # "Nice." (Kokoro jf_nezumi + jf_gongitsune, slow)
        HeardWord("Wait", 0.42),  # "Right." (jf_alpha)
        HeardWord("What", 0.45),  # "Right." (jf_alpha)
        HeardWord("Stop", 0.25),  # a command under Whisper's noise guesses
    ],
)
def test_an_unsure_cue_a_backchannel_is_heard_as_still_waits_for_more(heard: HeardWord) -> None:
    assert judge([heard], complete=False, voiced_ms=350)[0] is Verdict.UNDECIDED


def test_no_backchannel_is_a_command_word() -> None:
    # A command counts unsure: no backchannel word, sound or word of a phrase may be one ("Fair
    # enough." is heard "Very enough", "enough" at 0.38-0.49).
    phrase_words = {word for phrase in ENGLISH.phrase_forms for word in phrase}
    for command in ENGLISH.commands:
        form = canonical(command)
        assert form in ENGLISH.cue_forms and not _is_backchannel_word(form, ENGLISH), command
        assert not VOCABLES.match(form) and form not in phrase_words, command


def test_words_two_probes_agree_on_count_as_sure_up_to_the_first_change() -> None:
    before = (HeardWord("and", 0.30), HeardWord("so", 0.55))
    now = (HeardWord("And", 0.40), HeardWord("so", 0.49), HeardWord("my", 0.62))
    assert [round(w.probability, 2) for w in agreed(before, now)] == [0.5, 0.55, 0.62]
    # a changed word ends the agreement, even if a later one matches again
    changed = (HeardWord("Answer", 0.26), HeardWord("so", 0.3))
    assert [w.probability for w in agreed(before, changed)] == [0.26, 0.3]
    # a guess at a noise in either decode stays one
    assert agreed((HeardWord("but", 0.07),), (HeardWord("but", 0.6),))[0].probability == 0.6
    assert agreed((HeardWord("but", 0.5),), (HeardWord("but", 0.11),))[0].probability == 0.11
    assert agreed((), now) == now
