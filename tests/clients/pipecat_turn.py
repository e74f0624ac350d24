"""A minimal pipecat pipeline around ``OpenAIRealtimeLLMService`` (pipecat-ai 1.x, unchanged),
pointed at a gateway by its WebSocket URL: one typed turn, text out. Run by
tests/clients/test_pipecat.py in the client venv (``.venv-clients``: pipecat's pins conflict with
the gateway's), as ``python pipecat_turn.py WS_BASE_URL API_KEY``; prints one JSON line with what
the pipeline received, and exits non-zero on a pipeline error."""

from __future__ import annotations

import asyncio
import json
import sys

from pipecat.frames.frames import EndFrame, ErrorFrame, Frame, LLMFullResponseEndFrame, LLMRunFrame, LLMTextFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineParams, PipelineTask
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.openai.realtime import events
from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService


class Collector(FrameProcessor):
    """Keeps the LLM's text; ends the pipeline once the response is over (or failed)."""

    def __init__(self, done: asyncio.Event) -> None:
        super().__init__()
        self.text: list[str] = []
        self.errors: list[str] = []
        self.done = done

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMTextFrame):
            self.text.append(frame.text)
        elif isinstance(frame, ErrorFrame):
            self.errors.append(str(frame.error))
            self.done.set()
        elif isinstance(frame, LLMFullResponseEndFrame):
            self.done.set()
        await self.push_frame(frame, direction)


async def main(base_url: str, api_key: str) -> int:
    llm = OpenAIRealtimeLLMService(
        api_key=api_key,
        base_url=base_url,
        settings=OpenAIRealtimeLLMService.Settings(
            model="gpt-realtime",
            session_properties=events.SessionProperties(
                output_modalities=["text"], instructions="Answer in one short sentence."
            ),
        ),
    )
    context = LLMContext([{"role": "user", "content": "Say hello to the tester."}])
    aggregators = LLMContextAggregatorPair(context)
    done = asyncio.Event()
    collector = Collector(done)
    pipeline = Pipeline([aggregators.user(), llm, collector, aggregators.assistant()])
    task = PipelineTask(pipeline, params=PipelineParams(), idle_timeout_secs=None)
    runner = PipelineRunner(handle_sigint=False)
    running = asyncio.ensure_future(runner.run(task))
    await task.queue_frames([LLMRunFrame()])
    try:
        await asyncio.wait_for(done.wait(), 90)
    finally:
        await task.queue_frame(EndFrame())
        await asyncio.wait_for(running, 20)
    print(json.dumps({"text": "".join(collector.text), "errors": collector.errors}), flush=True)
    return 0 if collector.text and not collector.errors else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2])))
