"""Test doubles (never used by the product), by stage: ``llm`` (language models that block, fail,
wait, call a tool, end at once or have a tight budget), ``speech`` (a slow STT, TTS and playout
doubles, VAD, end-of-turn and STT doubles), ``chain`` (the StageContext and a hand-driven VAD ->
STT chain), ``control`` (the pipeline control a RealtimeSession drives, a manual clock for its
timers), ``transports`` (a full-pool door, a SIP peer, a file whose disk fills up once) and
``loadgen`` (a settling ``/v1/pool``). Every name is re-exported here: ``from tests.doubles import SttDouble``."""

from tests.doubles.chain import Chain, ContextDouble
from tests.doubles.control import PipelineControlDouble, TimersDouble
from tests.doubles.llm import (
    BlockingLanguageModelDouble,
    ChatStreamServerDouble,
    EndsAtOnceLanguageModelDouble,
    FailingOnceLanguageModelDouble,
    SlowLanguageModelDouble,
    TightBudgetLanguageModelDouble,
    ToolCallingLanguageModelDouble,
)
from tests.doubles.loadgen import DrainingGatewayDouble, SettlingPoolDouble
from tests.doubles.speech import (
    CALL,
    NUMBERS,
    RATE,
    EndOfTurnDouble,
    GradedVadStreamDouble,
    MeanwhileSttDouble,
    PlayoutDouble,
    ScoredSttDouble,
    ScriptedSttDouble,
    SlowProbesSpeechToTextDouble,
    SlowSpeechToTextDouble,
    SttDouble,
    TextToSpeechDouble,
    TtsContextDouble,
    UntrustedSttDouble,
    VadDouble,
    VadStreamDouble,
)
from tests.doubles.transports import DiskFullOnceFileDouble, FullPoolDoorDouble, RecordingPeerDouble

__all__ = [
    "CALL",
    "NUMBERS",
    "RATE",
    "BlockingLanguageModelDouble",
    "Chain",
    "ChatStreamServerDouble",
    "ContextDouble",
    "DiskFullOnceFileDouble",
    "DrainingGatewayDouble",
    "EndOfTurnDouble",
    "EndsAtOnceLanguageModelDouble",
    "FailingOnceLanguageModelDouble",
    "FullPoolDoorDouble",
    "GradedVadStreamDouble",
    "MeanwhileSttDouble",
    "PipelineControlDouble",
    "PlayoutDouble",
    "RecordingPeerDouble",
    "ScoredSttDouble",
    "ScriptedSttDouble",
    "SettlingPoolDouble",
    "SlowLanguageModelDouble",
    "SlowProbesSpeechToTextDouble",
    "SlowSpeechToTextDouble",
    "SttDouble",
    "TextToSpeechDouble",
    "TightBudgetLanguageModelDouble",
    "TimersDouble",
    "ToolCallingLanguageModelDouble",
    "TtsContextDouble",
    "UntrustedSttDouble",
    "VadDouble",
    "VadStreamDouble",
]
