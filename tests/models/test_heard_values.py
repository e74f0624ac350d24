"""Whether a call's argument values were heard (``gateway.models.heard_values``): the rule alone, no
model. Calls the real model made on the tuning questions (``scripts/tool_questions.py``)."""

from __future__ import annotations

from gateway.models.base import ChatMessage, FunctionTool, ToolCall
from gateway.models.heard_values import unheard, unheard_names
from gateway.models.tool_decision import WORDS, Decision, auto_call

PLAIN = ChatMessage("system", "You are a helpful assistant.")


def _tool(name: str, description: str, *keys: str, enum: tuple[str, ...] = ()) -> FunctionTool:
    properties: dict = {key: {"type": "string"} for key in keys}
    if enum:
        properties["unit"] = {"type": "string", "enum": list(enum)}
    return FunctionTool(name, description, {"type": "object", "properties": properties, "required": [keys[0]]})


TAXI = _tool("order_taxi", "Order a taxi to a destination.", "destination", "pickup_time")
FLIGHT = _tool("check_flight", "The status of a flight by its number.", "flight_number")
STOCK = _tool("get_stock_price", "The latest share price of a listed company.", "symbol")
MUSIC = _tool("play_music", "Play a song, an artist or a genre on the speaker.", "query")
SHOPPING = _tool("add_to_shopping_list", "Add an item to the shopping list.", "item")
TRANSLATE = _tool("translate_text", "Translate a phrase into another language.", "text", "language")
WEATHER = _tool("get_weather", "Get the current weather for a city.", "city", enum=("celsius", "fahrenheit"))


def _unheard(tool: FunctionTool, question: str, arguments: str) -> list[str]:
    return unheard(ToolCall("call_1", tool.name, arguments), tool, [PLAIN, ChatMessage("user", question)])


def test_a_value_nobody_said_is_not_heard() -> None:
    """The two tuning calls the token check let stand: values the model was sure of, said nowhere."""
    assert _unheard(
        TAXI,
        "How much does a taxi ride usually cost per mile?",
        '{"destination": "New York", "pickup_time": "10:00 AM"}',
    ) == ["New York", "10:00 AM"]
    assert _unheard(FLIGHT, "What time does the New York stock exchange open?", '{"flight_number": "N0012345"}') == [
        "N0012345"
    ]
    assert _unheard(MUSIC, "Why is music relaxing?", '{"query": "relaxing piano"}') == ["relaxing piano"]


def test_values_taken_from_the_message_are_heard_in_another_form() -> None:
    """Endings, function words, numbers in words or digits, clock hours either way round."""
    assert _unheard(MUSIC, "Put some Beatles on.", '{"query": "The Beatles"}') == []
    assert _unheard(SHOPPING, "We're out of eggs, put them on the list.", '{"item": "egg"}') == []
    assert _unheard(MUSIC, "I'm in the mood for something classical.", '{"query": "classic"}') == []
    assert _unheard(FLIGHT, "Is flight BA 117 on time?", '{"flight_number": "BA117"}') == [], "written together"
    assert _unheard(FLIGHT, "Is flight BA 117 on time?", '{"flight_number": "BA 117"}') == []
    assert (
        _unheard(
            TAXI, "I need a taxi to 5 Main Street at 6 pm.", '{"destination": "5 Main St", "pickup_time": "18:00"}'
        )
        == []
    ), "the start of a heard word (squeezed: '5mainst' in '5mainstreet')"
    assert _unheard(TAXI, "A taxi to the Hilton.", '{"destination": "Hilton Main St"}') == ["Hilton Main St"]
    assert (
        _unheard(
            TAXI, "I need a taxi to 5 Main Street at 6 pm.", '{"destination": "5 Main Street", "pickup_time": "18:00"}'
        )
        == []
    )
    assert (
        _unheard(
            TAXI, "A ride to the station in twenty minutes.", '{"destination": "station", "pickup_time": "20 minutes"}'
        )
        == []
    )
    assert (
        _unheard(
            TAXI, "A ride to the station in 20 minutes.", '{"destination": "station", "pickup_time": "twenty minutes"}'
        )
        == []
    )
    assert _unheard(TAXI, "Book me a taxi home at 11.", '{"destination": "home", "pickup_time": "23:00"}') == []
    assert _unheard(TAXI, "Book me a taxi home at 11.", '{"destination": "home", "pickup_time": "17:00"}') == ["17:00"]


def test_derived_values_are_heard() -> None:
    """Codes (a symbol, a currency, a language), dates and times when a time was named,
    translations, and an enum's values."""
    assert _unheard(STOCK, "How is Apple stock doing today?", '{"symbol": "AAPL"}') == []
    assert _unheard(TRANSLATE, "How do you say good night in French?", '{"text": "good night", "language": "fr"}') == []
    assert (
        _unheard(TRANSLATE, "How do you say good night in French?", '{"text": "Bonne nuit", "language": "French"}')
        == []
    )
    assert (
        _unheard(
            TAXI, "A cab to the airport tomorrow.", '{"destination": "airport", "pickup_time": "2026-12-06 09:00"}'
        )
        == []
    )
    assert _unheard(TAXI, "A cab to the airport.", '{"destination": "airport", "pickup_time": "2026-12-06"}') == [
        "2026-12-06"
    ], "a date with no time named"
    assert _unheard(WEATHER, "Is it cold in Oslo?", '{"city": "Oslo", "unit": "fahrenheit"}') == []
    assert _unheard(TAXI, "Get me a cab to the airport.", '{"destination": "airport", "pickup_time": "now"}') == []
    assert _unheard(WEATHER, "Is it cold in Oslo?", '{"city": "Oslo", "days": 3, "ok": true}') == [], "strings only"
    said = [ChatMessage("system", "You are the assistant of the Hilton Lisbon."), ChatMessage("user", "A cab, please.")]
    assert unheard(ToolCall("c", "order_taxi", '{"destination": "Hilton"}'), TAXI, said) == [], "the instructions count"
    assert unheard(ToolCall("c", "order_taxi", "not json"), TAXI, said) == []


def test_calibration_scores_the_heard_check_on_its_call() -> None:
    """``auto_call`` (what ``bench_tools.py --calibrate`` scores) with the heard check: a call with a
    value not heard is words; not judged (None) or all heard, the call stands."""
    scores = {WORDS: -3.0, "order_taxi": -0.05}
    call = ToolCall("call_1", "order_taxi", '{"destination": "New York"}')
    decision = Decision("order_taxi", 0.95, scores, likeliest="order_taxi", call=call, grounding=-0.1)
    assert auto_call(decision, 0.7, heard=True) == "order_taxi", "not judged (None): the call stands"
    decision.unheard = ["New York"]
    assert auto_call(decision, 0.7, heard=True) is None and auto_call(decision, 0.7, heard=False) == "order_taxi"
    decision.unheard = []
    assert auto_call(decision, 0.7, heard=True) == "order_taxi"


def _names(tool: FunctionTool, question: str, arguments: str) -> list[str]:
    return unheard_names(ToolCall("call_1", tool.name, arguments), tool, [PLAIN, ChatMessage("user", question)])


APPOINTMENT = _tool("book_appointment", "Book an appointment with a service.", "service", "time")


def test_a_name_nobody_said_is_caught_and_times_in_the_models_own_form_are_not_judged() -> None:
    """The names check ``auto`` runs (``NAMES_CHECK``): a capitalised name none of whose words was
    said is invented; a time, a date, an amount or free text is never judged, so the relative times
    that made the full check lose wanted calls ("at noon" -> "12:00", "tomorrow at nine") pass.
    Calls the real model made on the tuning questions (TUNING, stop 44)."""
    assert _names(
        TAXI,
        "How much does a taxi ride usually cost per mile?",
        '{"destination": "New York", "pickup_time": "10:00 AM"}',
    ) == ["New York"]
    assert (
        _names(TAXI, "Send a cab to the station at noon.", '{"destination": "station", "pickup_time": "12:00"}') == []
    )
    assert _unheard(TAXI, "Send a cab to the station at noon.", '{"destination": "station", "pickup_time": "12:00"}'), (
        "the full check does not know noon"
    )
    assert (
        _names(APPOINTMENT, "Book me a haircut tomorrow at noon.", '{"service": "Haircut", "time": "tomorrow 12pm"}')
        == []
    )
    assert _names(TAXI, "Send a car to take me to the Hilton.", '{"destination": "The Hilton Hotel"}') == [], (
        "one word of the name heard is enough"
    )
    assert (
        _names(TAXI, "Get me a cab to the airport.", '{"destination": "airport", "pickup_time": "Monday Morning"}')
        == []
    )
    assert _names(STOCK, "How is Apple stock doing today?", '{"symbol": "AAPL"}') == [], "a code"
    assert (
        _names(TRANSLATE, "How do you say good night in French?", '{"text": "Bonne Nuit", "language": "French"}') == []
    )
    assert _names(SHOPPING, "Remember that we need coffee.", '{"item": "Water the plants"}') == [], "free text"
    assert _names(WEATHER, "Is it cold in Oslo?", '{"city": "Oslo", "unit": "Celsius"}') == [], "an enum's value"
    assert _names(WEATHER, "How many moons does Mars have?", '{"city": "Mars"}') == []
    assert unheard_names(ToolCall("c", "order_taxi", "not json"), TAXI, [PLAIN]) == []
