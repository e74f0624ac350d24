"""The first piece of a reply is a short clause, so TTS can start on it; later pieces are sentences."""

from __future__ import annotations

from gateway.pipeline.chunking import SentenceChunker


def stream(text: str, chunker: SentenceChunker | None = None) -> list[list[str]]:
    """Push ``text`` word by word, as an LLM streams tokens (" word"); the pieces after each push."""
    chunker = chunker or SentenceChunker()
    out = []
    for index, word in enumerate(text.split(" ")):
        out.append(chunker.push(word if index == 0 else " " + word))
    out.append(chunker.flush())
    return out


def pieces(text: str) -> list[str]:
    return [piece for step in stream(text) for piece in step]


def test_comma_before_three_words_does_not_cut() -> None:
    assert pieces("Sure thing, I can help you with that today. Anything else?") == [
        "Sure thing, I can help you",
        "with that today.",
        "Anything else?",
    ]


def test_comma_after_three_words_cuts() -> None:
    assert pieces("Well, the capital of France, as you know, is Paris. It is big.") == [
        "Well, the capital of France,",
        "as you know, is Paris.",
        "It is big.",
    ]


def test_colon_cuts_too() -> None:
    assert pieces("Here is the plan: we leave at noon.")[0] == "Here is the plan:"


def test_no_punctuation_cuts_after_six_words() -> None:
    steps = stream("I think the train leaves from platform nine at noon.")
    first = next(piece for step in steps for piece in step)
    assert first == "I think the train leaves from"
    # ...and it came out as soon as the sixth word was complete (when the seventh began).
    assert steps[6] == ["I think the train leaves from"]


def test_a_short_first_sentence_is_kept_whole() -> None:
    assert pieces("Paris is lovely. It has many museums, parks, and cafes.") == [
        "Paris is lovely.",
        "It has many museums, parks, and cafes.",
    ]


def test_later_pieces_are_whole_sentences() -> None:
    text = "Yes, of course. The museum opens at nine, closes at five, and is free on Sundays. Enjoy!"
    assert pieces(text) == [
        "Yes, of course.",
        "The museum opens at nine, closes at five, and is free on Sundays.",
        "Enjoy!",
    ]


def test_nothing_is_lost_or_reordered() -> None:
    text = "Hmm, let me think about that for a moment, because it is a good question: why is the sky blue?"
    assert " ".join(pieces(text)) == text
