"""Decode step times by batch size (``gateway.models.compute.decode_capacity``): the per-size
medians of the recent steps. No clock is involved."""

from __future__ import annotations

from gateway.models.compute.decode_capacity import StepTimes


def test_step_times_keep_the_median_of_the_recent_steps_per_size():
    times = StepTimes(keep=3)
    for seconds in (0.100, 0.900, 0.110):  # one step slowed by a busy core does not count
        times.record(1, seconds)
    times.record(2, 0.150)
    times.record(0, 1.0)  # no sequences: ignored
    times.record(3, 0.0)  # no duration: ignored
    assert times.typical_ms() == {1: 110.0, 2: 150.0}
    for seconds in (0.200, 0.210, 0.220):  # older steps leave: the machine is slower now
        times.record(1, seconds)
    assert times.typical_ms()[1] == 210.0
