"""What TTS reads: no markdown, list markers or emoji; symbols said as words."""

from __future__ import annotations

import pytest

from gateway.pipeline.spoken_text import SpokenTextStream, spoken


def through_stream(text: str, step: int) -> str:
    stream = SpokenTextStream()
    out = "".join(stream.push(text[i : i + step]) for i in range(0, len(text), step))
    return spoken(out + stream.flush())


@pytest.mark.parametrize("step", [1, 3, 100])
def test_lists_headings_and_fences_are_not_read(step: int) -> None:
    text = "## Capitals\nHere are three:\n1. **Paris**\n2. Rome\n- Berlin\n```\ncode\n```\n> Done"
    said = through_stream(text, step)
    assert said == "Capitals. Here are three: Paris. Rome. Berlin. code. Done", said


@pytest.mark.parametrize("step", [1, 100])
def test_plain_sentences_pass_unchanged(step: int) -> None:
    for text in ("The capital of France is Paris.", "It was 2024. -5 is below zero.", "42", "1.5 million people."):
        assert through_stream(text, step) == text


def test_symbols_emoji_and_links_are_said_as_words() -> None:
    assert spoken("Water boils at 100°C 🙂!") == "Water boils at 100 degrees Celsius!"
    assert spoken("About 71% of Earth is water.") == "About 71 percent of Earth is water."
    assert spoken("It costs $3.50, or 3-5 euros.") == "It costs 3.50 dollars, or 3 to 5 euros."
    assert spoken("See [the docs](https://example.com) and `ls`.") == "See the docs and ls."
    assert spoken("snake_case stays, _emphasis_ goes") == "snake_case stays, emphasis goes"
    assert spoken("🎉🎉") == ""
