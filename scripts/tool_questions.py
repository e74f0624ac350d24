"""Question sets for the function-calling benchmarks (``scripts/bench_tools.py``): tools, instruction
styles, and three sets of typed questions kept apart.

- ``TUNING``: what the call decision (its prompt and threshold) was tuned on. Tools and wording of
  their own: no weather, no table booking, no question of the other sets. 38 questions, grown by
  ``TUNING_HARD`` (16: knowledge on a tool's subject, live data or an action asked indirectly) and
  ``TUNING_FIFTH`` (19, fifth round: more knowledge near a tool's subject, needs) and ``TUNING_TIMES``
  (12, stop 44: needs with times said as people say them, knowledge naming no place): 85 in all.
- ``BENCH``: 48 held-out questions (tool / no tool / which tool; 1 to 4 tools each), run under
  every instruction style of ``STYLES``; never tuned on.
- ``PROBE``: 12 held-out questions of the kind an app reported (plain instructions, ``get_weather``
  and ``book_table``): 4 weather, 2 bookings, 6 to answer in words; never tuned on.
- ``FRESH``: 41 held-out questions (17 need a tool) written (2026-12-04) before the second round of tuning, with
  tools and app instructions (``FRESH_STYLES``) of their own; frozen: measured once per design
  kept, at the end (see docs/BENCHMARKS.md for how many times it was looked at).

A question's ``tool`` is the function it needs (None: answer in words) and ``expect`` a value its
arguments must hold (lower-case text).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional


def _tool(name: str, description: str, properties: dict[str, Any], required: Optional[list[str]] = None) -> dict:
    return {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required or list(properties)},
    }


_S = {"type": "string"}
TOOLS: dict[str, dict[str, Any]] = {
    t["name"]: t
    for t in [
        _tool(
            "get_weather",
            "Get the current weather for a city.",
            {"city": {"type": "string", "description": "City name"}},
        ),
        _tool(
            "book_table",
            "Book a table at a restaurant.",
            {"restaurant": _S, "time": {"type": "string", "description": "e.g. 19:00"}, "people": {"type": "integer"}},
        ),
        _tool(
            "set_timer",
            "Start a countdown timer.",
            {"minutes": {"type": "integer", "description": "Length in minutes"}},
        ),
        _tool("get_time", "The current local time in a city.", {"city": _S}),
        _tool(
            "convert_currency",
            "Convert an amount of money between currencies.",
            {
                "amount": {"type": "number"},
                "from_currency": {"type": "string", "description": "ISO code, e.g. USD"},
                "to_currency": {"type": "string", "description": "ISO code, e.g. EUR"},
            },
        ),
        _tool("send_message", "Send a text message to a contact.", {"contact": _S, "text": _S}),
        # Tuning only:
        _tool("play_music", "Play a song, an artist or a genre on the speaker.", {"query": _S}),
        _tool("turn_on_lights", "Switch on the lights in a room of the house.", {"room": _S}),
        _tool("get_stock_price", "The latest share price of a listed company.", {"symbol": _S}),
        _tool("order_taxi", "Order a taxi to a destination.", {"destination": _S, "pickup_time": _S}, ["destination"]),
        _tool("check_flight", "The status of a flight by its number.", {"flight_number": _S}),
        _tool("add_to_shopping_list", "Add an item to the shopping list.", {"item": _S}),
        _tool("translate_text", "Translate a phrase into another language.", {"text": _S, "language": _S}),
        _tool(
            "book_appointment",
            "Book an appointment with a service such as a hairdresser, a doctor or a mechanic.",
            {"service": _S, "time": {"type": "string", "description": "e.g. 14:30 or Friday 10am"}},
        ),
        # Fresh only:
        _tool(
            "create_reminder",
            "Create a reminder that alerts the user at a given time.",
            {"text": _S, "time": {"type": "string", "description": "e.g. 08:30 or tomorrow 9am"}},
        ),
        _tool("get_news", "Get the latest news headlines on a topic.", {"topic": _S}),
        _tool("track_parcel", "Look up where a parcel is by its tracking number.", {"tracking_number": _S}),
        _tool(
            "set_thermostat",
            "Set the home heating to a temperature.",
            {"degrees_c": {"type": "number", "description": "Target temperature in Celsius"}},
        ),
        _tool("lock_door", "Lock one of the doors of the house.", {"door": _S}),
        _tool(
            "find_train",
            "The next train departures between two stations.",
            {"from_station": _S, "to_station": _S},
        ),
        _tool("call_contact", "Start a phone call to someone in the contacts.", {"contact": _S}),
    ]
}

# Instruction styles: an app's plain line, an app's own (naming what its tools are for), none at all,
# and the gateway's default (None: the session keeps the configured instructions).
STYLES: dict[str, Optional[str]] = {
    "plain": "You are a helpful assistant.",
    "app": (
        "You are Robin, the voice assistant of the Harbour Hotel. Greet guests warmly and keep answers short. "
        "You can check the weather, reserve tables at the hotel's restaurants, set timers, tell the time in other "
        "cities, convert money and send messages for guests."
    ),
    "none": "",
    "gateway": None,
}
# Fresh styles: the same kinds, words of their own.
FRESH_STYLES: dict[str, Optional[str]] = {
    "plain": "You are a friendly assistant. Keep it short.",
    "app": (
        "You are Pip, the home assistant of the Alvarez family. Be warm and brief. You can set reminders, read "
        "the news, track parcels, change the heating, lock doors, find trains and phone people for the family."
    ),
    "none": "",
    "gateway": None,
}
# Tuning styles: the same kinds with other words where a kind has words of its own.
TUNING_STYLES: dict[str, Optional[str]] = {
    "plain": "You are a helpful assistant.",
    "app": (
        "You are Juno, the in-car assistant of Velo Motors. Speak briefly and clearly; the driver is on the road. "
        "Use your functions for music, the cabin lights, taxis, flights, stocks and the shopping list."
    ),
    "none": "",
    "gateway": None,
}


@dataclass(frozen=True)
class Question:
    prompt: str
    tools: tuple[str, ...]  # names in TOOLS offered with it
    tool: Optional[str] = None  # the one it needs; None: answer in words
    expect: str = ""  # a value the arguments must hold (lower-case)


def _group(tools: tuple[str, ...], rows: list[tuple[str, Optional[str], str]]) -> list[Question]:
    return [Question(prompt, tools, tool, expect) for prompt, tool, expect in rows]


W = ("get_weather",)
WB = ("get_weather", "book_table")
TTC = ("set_timer", "get_time", "convert_currency")
WBTS = ("get_weather", "book_table", "set_timer", "send_message")
WTTC = ("get_weather", "get_time", "set_timer", "convert_currency")

BENCH: list[Question] = [
    *_group(
        W,
        [
            ("What's the forecast for Chicago tomorrow?", "get_weather", "chicago"),
            ("Will I need a coat in Oslo today?", "get_weather", "oslo"),
            ("Is it sunny in Madrid right now?", "get_weather", "madrid"),
            ("Who painted the Mona Lisa?", None, ""),
            ("At what temperature does water boil?", None, ""),
            ("Tell me something fun about penguins.", None, ""),
        ],
    ),
    *_group(
        WB,
        [
            ("Can you get me a table for three at Nando's at six thirty?", "book_table", "nando"),
            ("I'd like to reserve dinner for two at Chez Paul tomorrow at 8.", "book_table", "chez paul"),
            ("Please book the Golden Dragon for six people at noon.", "book_table", "golden dragon"),
            ("How windy is it in Dublin?", "get_weather", "dublin"),
            ("What's the temperature in Cairo?", "get_weather", "cairo"),
            ("What's a good name for a goldfish?", None, ""),
            ("How many days are in a leap year?", None, ""),
            ("Can you recommend a good book?", None, ""),
            ("How do you say thank you in Spanish?", None, ""),
        ],
    ),
    *_group(
        TTC,
        [
            ("Set a fifteen minute timer for the oven.", "set_timer", "15"),
            ("Count down three minutes for my tea.", "set_timer", "3"),
            ("What time is it in Tokyo right now?", "get_time", "tokyo"),
            ("What hour is it over in Los Angeles?", "get_time", "los angeles"),
            ("How many euros would I get for 200 dollars?", "convert_currency", "200"),
            ("Change 75 pounds into Swiss francs.", "convert_currency", "75"),
            ("How many minutes are in a day?", None, ""),
            ("What currency does Japan use?", None, ""),
            ("Who invented the clock?", None, ""),
            ("What's the square root of 81?", None, ""),
        ],
    ),
    *_group(
        WBTS,
        [
            ("Text Maria that I'm running ten minutes late.", "send_message", "maria"),
            ("Send a message to Tom saying dinner is ready.", "send_message", "tom"),
            ("Is it going to snow in Denver tonight?", "get_weather", "denver"),
            ("Book a table for four at Olive Garden at seven.", "book_table", "olive garden"),
            ("Start a timer for half an hour.", "set_timer", "30"),
            ("What is the tallest mountain in the world?", None, ""),
            ("How do I write a polite note declining an invitation?", None, ""),
            ("Why do leaves change color in autumn?", None, ""),
            ("What should I cook for dinner tonight?", None, ""),
            ("Thanks, that's all.", None, ""),
            ("Good morning!", None, ""),
        ],
    ),
    *_group(
        WTTC,
        [
            ("Is it raining in Vancouver?", "get_weather", "vancouver"),
            ("Do I need sunglasses in Lisbon today?", "get_weather", "lisbon"),
            ("Tell me the time in Rome.", "get_time", "rome"),
            ("What's 30 dollars in Canadian dollars?", "convert_currency", "30"),
            ("Put a timer on for eight minutes.", "set_timer", "8"),
            ("How hot is the sun?", None, ""),
            ("What's the capital of Australia?", None, ""),
            ("Can you explain what inflation is?", None, ""),
            ("How long should bread dough rise?", None, ""),
            ("Tell me a riddle.", None, ""),
            ("What year did the Second World War end?", None, ""),
            ("What are clouds made of?", None, ""),
        ],
    ),
]

PROBE_INSTRUCTIONS = "You are a helpful assistant."
PROBE: list[Question] = _group(
    WB,
    [
        ("What's the weather like in Amsterdam today?", "get_weather", "amsterdam"),
        ("Is it cold in Stockholm right now?", "get_weather", "stockholm"),
        ("Will it rain in Prague this afternoon?", "get_weather", "prague"),
        ("How warm is it in Athens?", "get_weather", "athens"),
        ("Could you book us a table for five at Mario's at half past seven?", "book_table", "mario"),
        ("Reserve a table for two tomorrow at nine at the Blue Lotus.", "book_table", "blue lotus"),
        ("Why do cats purr?", None, ""),
        ("How many moons does Mars have?", None, ""),
        ("Tell me a funny story about a dog.", None, ""),
        ("What is the capital of Norway?", None, ""),
        ("How do I make a cup of tea?", None, ""),
        ("What color is a flamingo, and why?", None, ""),
    ],
)

MUSIC_LIGHTS = ("play_music", "turn_on_lights")
STOCK_TAXI_FLIGHT = ("get_stock_price", "order_taxi", "check_flight")
HOME4 = ("play_music", "add_to_shopping_list", "translate_text", "turn_on_lights")
TUNING: list[Question] = [
    *_group(
        ("play_music",),
        [
            ("Put on some jazz.", "play_music", "jazz"),
            ("I want to hear Bohemian Rhapsody.", "play_music", "bohemian"),
            ("Who composed the Four Seasons?", None, ""),
            ("What is a guitar made of?", None, ""),
            ("How far away is the moon?", None, ""),
        ],
    ),
    *_group(
        MUSIC_LIGHTS,
        [
            ("Play something by Taylor Swift.", "play_music", "taylor swift"),
            ("Turn the kitchen lights on.", "turn_on_lights", "kitchen"),
            ("It's dark in the bedroom, can you light it up?", "turn_on_lights", "bedroom"),
            ("Why is music relaxing?", None, ""),
            ("How does a light bulb work?", None, ""),
            ("What's the biggest animal on earth?", None, ""),
            ("Can you tell me a bedtime story?", None, ""),
        ],
    ),
    *_group(
        STOCK_TAXI_FLIGHT,
        [
            ("How is Apple stock doing today?", "get_stock_price", "aapl"),
            ("What's Tesla trading at?", "get_stock_price", "tsla"),
            ("Get me a cab to the airport.", "order_taxi", "airport"),
            ("I need a taxi to 5 Main Street at 6 pm.", "order_taxi", "main street"),
            ("Is flight BA 117 on time?", "check_flight", "ba"),
            ("Has UA 930 landed yet?", "check_flight", "930"),
            ("What is a stock market?", None, ""),
            ("How do airplanes stay in the air?", None, ""),
            ("Who was the first person on the moon?", None, ""),
            ("How should I invest my savings?", None, ""),
            ("What's the fastest car in the world?", None, ""),
            ("How are you today?", None, ""),
        ],
    ),
    *_group(
        HOME4,
        [
            ("Add milk to my shopping list.", "add_to_shopping_list", "milk"),
            ("We're out of eggs, put them on the list.", "add_to_shopping_list", "egg"),
            ("How do you say good night in French?", "translate_text", "french"),
            ("Translate 'where is the station' into German.", "translate_text", "german"),
            ("Play the latest Adele album.", "play_music", "adele"),
            ("Switch on the lights in the living room.", "turn_on_lights", "living room"),
            ("What does bonjour mean?", None, ""),
            ("How many languages are spoken in India?", None, ""),
            ("What's a healthy breakfast?", None, ""),
            ("Why do we dream?", None, ""),
            ("What is photosynthesis?", None, ""),
            ("Give me a fun fact.", None, ""),
            ("Okay, thank you so much.", None, ""),
            ("Hi there!", None, ""),
        ],
    ),
]

REMINDER = ("create_reminder",)
NEWS_PARCEL = ("get_news", "track_parcel")
HOUSE = ("set_thermostat", "lock_door", "create_reminder")
ERRANDS = ("find_train", "call_contact", "get_news", "track_parcel")
FRESH: list[Question] = [
    *_group(
        REMINDER,
        [
            ("Remind me to water the plants at six tonight.", "create_reminder", "plants"),
            ("Don't let me forget the dentist tomorrow at nine.", "create_reminder", "dentist"),
            ("How do I remember people's names better?", None, ""),
            ("What rhymes with orange?", None, ""),
            ("How long do elephants live?", None, ""),
        ],
    ),
    *_group(
        NEWS_PARCEL,
        [
            ("What's happening in the news about the election?", "get_news", "election"),
            ("Any headlines on football today?", "get_news", "football"),
            ("Where is my package 1Z999AA10123456784?", "track_parcel", "1z999aa10123456784"),
            ("Can you check on parcel number JD0002245?", "track_parcel", "jd0002245"),
            ("Who owns the New York Times?", None, ""),
            ("How does a postal code work?", None, ""),
            ("What's the plural of cactus?", None, ""),
            ("Hey, how's it going?", None, ""),
            ("Write me a short poem about rain.", None, ""),
        ],
    ),
    *_group(
        HOUSE,
        [
            ("Make it 21 degrees in here.", "set_thermostat", "21"),
            ("Turn the heating down to eighteen.", "set_thermostat", "18"),
            ("Lock the front door.", "lock_door", "front"),
            ("Did I leave the garage unlocked? Lock it please.", "lock_door", "garage"),
            ("Set a reminder to call grandma on Sunday at noon.", "create_reminder", "grandma"),
            ("What temperature is best for sleeping?", None, ""),
            ("Who invented the lock and key?", None, ""),
            ("How do I bleed a radiator?", None, ""),
            ("Is it cheaper to leave the heating on all day?", None, ""),
            ("What's the difference between a deadbolt and a latch?", None, ""),
            ("Goodnight, see you tomorrow.", None, ""),
        ],
    ),
    *_group(
        ERRANDS,
        [
            ("When's the next train from Leeds to York?", "find_train", "leeds"),
            ("I need to get from Brighton to London Victoria, what trains are there?", "find_train", "brighton"),
            ("Call my sister Ana.", "call_contact", "ana"),
            ("Ring Dr. Patel for me.", "call_contact", "patel"),
            ("What's new in science today?", "get_news", "science"),
            ("Track parcel AB123456789GB.", "track_parcel", "ab123456789gb"),
            ("How fast can a high speed train go?", None, ""),
            ("Who invented the telephone?", None, ""),
            ("What is a news anchor?", None, ""),
            ("How many stations does the London Underground have?", None, ""),
            ("What's seven times eight?", None, ""),
            ("Can you suggest a name for my new puppy?", None, ""),
            ("Why is the ocean salty?", None, ""),
            ("Thanks, you've been a big help.", None, ""),
            ("Tell me a joke about trains.", None, ""),
            ("How do I say sorry to a friend?", None, ""),
        ],
    ),
]
# Grown 2026-12-04 (second round, before tuning on them): knowledge questions on a tool's subject,
# live data or an action asked indirectly. TUNING's own tools; no question of the other sets.
TUNING_HARD: list[Question] = [
    *_group(
        STOCK_TAXI_FLIGHT,
        [
            ("Should I sell my Nvidia shares at today's price?", "get_stock_price", "nvda"),
            ("Will my flight LH 400 leave on time today?", "check_flight", "400"),
            ("I'll need a ride to the train station in twenty minutes.", "order_taxi", "station"),
            ("Who founded Tesla?", None, ""),
            ("How long is a flight from London to New York?", None, ""),
            ("How much should I tip a taxi driver?", None, ""),
            ("What does a stock split mean?", None, ""),
        ],
    ),
    *_group(
        HOME4,
        [
            ("I'm in the mood for something classical.", "play_music", "classical"),
            ("I can't see a thing in the hallway.", "turn_on_lights", "hallway"),
            ("Remember that we need coffee.", "add_to_shopping_list", "coffee"),
            ("What's thank you in Japanese?", "translate_text", "japanese"),
            ("Who sang Hey Jude?", None, ""),
            ("Why do LED bulbs last longer?", None, ""),
            ("What language do they speak in Brazil?", None, ""),
            ("What goes into pancake batter?", None, ""),
            ("How many strings does a violin have?", None, ""),
        ],
    ),
]
TUNING.extend(TUNING_HARD)
# Grown 2026-12-04 (fifth round, written before any run on them): more knowledge near a tool's
# subject and needs whose arguments are in the message. TUNING's own tools; no question of the
# other sets.
TUNING_FIFTH: list[Question] = [
    *_group(
        STOCK_TAXI_FLIGHT,
        [
            ("Check whether KL 1002 is delayed.", "check_flight", "1002"),
            ("What's Microsoft's share price right now?", "get_stock_price", "msft"),
            ("Send a car to take me to the Hilton.", "order_taxi", "hilton"),
            ("Book me a taxi home at 11.", "order_taxi", "home"),
            ("How many hours does it take to fly from Paris to Tokyo?", None, ""),
            ("What was the first commercial airline?", None, ""),
            ("How much does a taxi ride usually cost per mile?", None, ""),
            ("What time does the New York stock exchange open?", None, ""),
            ("Which airline has the biggest fleet?", None, ""),
        ],
    ),
    *_group(
        HOME4,
        [
            ("Put some Beatles on.", "play_music", "beatles"),
            ("We're running low on olive oil.", "add_to_shopping_list", "olive oil"),
            ("Light up the garage, please.", "turn_on_lights", "garage"),
            ("Say 'happy birthday' in Italian for me.", "translate_text", "italian"),
            ("How many notes are in a musical scale?", None, ""),
            ("Who wrote the song Imagine?", None, ""),
            ("What is the best way to store bread?", None, ""),
            ("How many watts does a light bulb use?", None, ""),
            ("What's the loudest instrument in an orchestra?", None, ""),
            ("Why do candles flicker?", None, ""),
        ],
    ),
]
TUNING.extend(TUNING_FIFTH)
# Grown 2026-12-05 (stop 44, written before any run on them): needs whose times are said the way
# people say them (noon, tonight, tomorrow at nine, half past six, on Friday), and knowledge
# questions near the tools' subject that name no place or business. TUNING's own tools.
TAXI_APPOINTMENT = ("order_taxi", "book_appointment")
TUNING_TIMES: list[Question] = [
    *_group(
        TAXI_APPOINTMENT,
        [
            ("Send a cab to the station at noon.", "order_taxi", "station"),
            ("I need a taxi to the hotel tomorrow at nine.", "order_taxi", "hotel"),
            ("Get me a car to the harbour at a quarter to eight tonight.", "order_taxi", "harbour"),
            ("Book me a haircut tomorrow at noon.", "book_appointment", "hair"),
            ("I need to see the dentist on Friday morning.", "book_appointment", "dentist"),
            ("Get my car into the garage at half past six on Monday.", "book_appointment", "car"),
            ("Can I see a doctor tonight at midnight?", "book_appointment", "doctor"),
            ("How often should I get my hair cut?", None, ""),
            ("How long does a taxi to the airport usually take?", None, ""),
            ("What time do most doctors open in the morning?", None, ""),
            ("How many taxis are there in a big city?", None, ""),
            ("What should I ask a mechanic before a long drive?", None, ""),
        ],
    ),
]
TUNING.extend(TUNING_TIMES)
