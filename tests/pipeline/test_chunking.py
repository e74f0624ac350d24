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
    assert chunker.push("Paris is the capital of France.") == []  # no space yet: may be "France.com"
    assert chunker.push(" It is") == ["Paris is the capital of France."]
    assert chunker.flush() == ["It is"]


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
