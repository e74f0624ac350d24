"""Every hostile test also checks that the gateway took the abuse as expected input: nothing was
logged at WARNING or above with a traceback (a handler that raised, a task that died). What the
client is told is checked by each test (no ``server_error`` event: :func:`tests.helpers.server_errors`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.helpers import logged_faults


@pytest.fixture(autouse=True)
def no_logged_exception(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.WARNING)
    yield
    faults = logged_faults(caplog.get_records("call"))
    assert not faults, faults
