"""Sentence chunking of streamed LLM text."""

from gateway.pipeline.chunking import SentenceChunker


def feed(text: str, chunker: SentenceChunker | None = None, step: int = 3) -> list[str]:
    chunker = chunker or SentenceChunker()
    pieces = []
    for i in range(0, len(text), step):
        pieces += chunker.push(text[i : i + step])
    return pieces + chunker.flush()


def test_sentences_come_out_as_soon_as_they_end():
    chunker = SentenceChunker()
    assert chunker.push("Hi. Paris is the capital of France.") == ["Hi."]
    assert chunker.push(" It is") == ["Paris is the capital of France."]  # waited for the space
    assert chunker.flush() == ["It is"]


def tokens(chunker: SentenceChunker, stream: list[str]) -> list[list[str]]:
    """The pieces out after each token of ``stream`` (an LLM's tokens: the space leads a word)."""
    return [chunker.push(token) for token in stream]


def test_the_first_piece_ends_at_its_mark_before_the_next_token():
    # Before: "Ten clubs." came out only with the reply's end, "One." with " Two": a decode step later.
    assert tokens(SentenceChunker(), ["Ten", " clubs", "."]) == [[], [], ["Ten clubs."]]
    assert tokens(SentenceChunker(), ["One", ".", " Two", "."]) == [[], ["One."], [], []]
    assert tokens(SentenceChunker(), ["Sure", "!"]) == [[], ["Sure!"]]
    assert tokens(SentenceChunker(), ["I", " don", "'t", "."]) == [[], [], [], ["I don't."]]
    assert tokens(SentenceChunker(), ["Yes", ",", " I", " can", ","]) == [[], [], [], [], ["Yes, I can,"]]


def test_a_mark_after_a_number_an_initial_or_an_abbreviation_waits_for_what_follows():
    assert tokens(SentenceChunker(), ["It", " costs", " 3", ".", "50", " now", "."])[-1] == ["It costs 3.50 now."]
    assert tokens(SentenceChunker(), ["Mr", ".", " Smith", " is", " here", "."]) == [[]] * 5 + [["Mr. Smith is here."]]
    assert tokens(SentenceChunker(), ["John", " F", "."]) == [[], [], []]
    talk = ["Talk", " to", " Dr", ".", " Lee", " about", " it", ".", " Bye"]
    assert [p for ps in tokens(SentenceChunker(), talk) for p in ps] == ["Talk to Dr. Lee about it."]
    assert tokens(SentenceChunker(), ["Yes", ","]) == [[], []]  # a clause of one word is too short


def test_punctuation_that_goes_on_after_an_early_cut_is_not_spoken_twice():
    chunker = SentenceChunker()
    out = [*tokens(chunker, ["Really", "?", "!", " Sure", " thing", ".", " More", "."]), chunker.flush()]
    assert [piece for pieces in out for piece in pieces] == ["Really?", "Sure thing.", "More."]
    chunker = SentenceChunker()  # what opens the next sentence stays: "¿", "(" (LLMs rarely leave out the space)
    out = [*tokens(chunker, ["Sure", "!", "¿", "Qué", " quieres", "?"]), chunker.flush()]
    assert [piece for pieces in out for piece in pieces] == ["Sure!", "¿Qué quieres?"]


def test_later_sentences_still_wait_for_the_space_after_their_mark():
    chunker = SentenceChunker()
    assert tokens(chunker, ["Okay", ".", " Go", " to", " example", "."]) == [[], ["Okay."], [], [], [], []]
    assert chunker.push("com") == []  # "example.com", not "example."


def test_whole_text_is_kept_in_order():
    text = "Hello there! How are you today? I am fine, thanks for asking. Bye."
    pieces = feed(text)
    assert " ".join(pieces) == text
    assert pieces[0] == "Hello there!"


def test_abbreviations_and_decimals_do_not_cut():
    pieces = feed("Dr. Smith paid 3.50 dollars, e.g. for coffee. Then he left.")
    assert pieces == ["Dr. Smith paid 3.50 dollars,", "e.g. for coffee.", "Then he left."]


def test_long_first_clause_is_cut_early_for_latency():
    pieces = feed("Well, the quick brown fox, which was very quick indeed, jumped over the dog. Done.")
    assert pieces[0] == "Well, the quick brown fox,"
    assert pieces[1] == "which was very quick indeed, jumped over the dog."


def test_text_without_punctuation_is_cut_at_a_space():
    text = "word " * 100
    pieces = feed(text, SentenceChunker(max_chars=50))
    assert all(len(p) <= 50 for p in pieces)
    assert " ".join(pieces).split() == text.split()
