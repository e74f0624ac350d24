"""The batched decoder serves by deadline (real default model, the shared instance): a reply's token
due far ahead waits while a first clause is read and answered, and a waiting evaluation whose
caller stops (a barge-in, a cancel) is dropped at once, never read."""

from __future__ import annotations

import threading
import time

from gateway.models.base import ModelSet


def test_a_paused_reply_waits_for_a_first_clause_and_a_cancel_drops_it_unread(models: ModelSet) -> None:
    llm = models.llm
    decoder = llm.decoder
    reply, first_clause = decoder.lease(), decoder.lease()
    try:
        said = llm.chat.tokenize("The harbour is old and the boats are blue")
        logits, _ = reply.evaluate(said, lambda: False)
        assert logits is not None
        stop = threading.Event()
        outcome: dict = {}

        def next_token() -> None:  # due a minute from now: its audio holds that much
            outcome["logits"] = reply.evaluate([*said, int(logits.argmax())], stop.is_set, due=time.monotonic() + 60)[0]

        waiting = threading.Thread(target=next_token)
        waiting.start()
        question = llm.chat.tokenize("Which city has the oldest harbour on the Baltic coast?")
        answered, _ = first_clause.evaluate(question, lambda: False)
        assert answered is not None, "the first clause was read and answered"
        assert waiting.is_alive() and reply.tokens == said, "meanwhile the paused reply was not stepped"
        stop.set()  # the caller barges in
        waiting.join(10)
        assert not waiting.is_alive() and outcome["logits"] is None, "the wait ended with the cancel"
        assert reply.tokens == said, "nothing of it was read"
    finally:
        reply.release()
        first_clause.release()
