"""The word test of barge-in (gateway.pipeline.backchannels): backchannels as Whisper base actually
writes them in voices it does not know are no interruption; words that ask for the turn are, when the
decoder was sure of them."""

from __future__ import annotations

import pytest

from gateway.models.base import HeardWord
from gateway.pipeline.backchannels import canonical, interrupting_words


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
