"""The talking capacity from decode step times (``gateway.models.compute.decode_capacity``): a pure
function of given timings, and the per-size medians it reads. No clock is involved."""

from __future__ import annotations

from gateway.models.compute.decode_capacity import StepTimes, talking_capacity

# Measured on a slow 2-core box, Qwen2.5-1.5B Q4_K_M (the module docstring of gateway.models.llama_cpp.batch), ms.
SLOW_BOX = {1: 101.0, 2: 144.0, 4: 227.0}


def test_capacity_is_the_largest_batch_within_twice_a_lone_step():
    assert talking_capacity({1: 100.0, 2: 150.0, 3: 199.0, 4: 260.0}, ceiling=4) == 3
    assert talking_capacity({1: 100.0, 2: 120.0, 3: 140.0, 4: 160.0}, ceiling=4) == 4
    assert talking_capacity({1: 100.0, 2: 201.0, 3: 250.0}, ceiling=4) == 1
    assert talking_capacity({1: 100.0, 2: 150.0, 3: 199.0}, ceiling=4, slowdown=1.5) == 2


def test_unmeasured_sizes_are_interpolated_never_extrapolated():
    # 3 sits between 144 and 227: 185.5 <= 202, 4 itself is 227 > 202
    assert talking_capacity(SLOW_BOX, ceiling=4) == 3
    # nothing measured above 2: 3 and 4 are not assumed to fit
    assert talking_capacity({1: 100.0, 2: 110.0}, ceiling=4) == 2
    # a slower size beyond a fitting one stops the count even if a later one fits
    assert talking_capacity({1: 100.0, 2: 250.0, 3: 150.0}, ceiling=4) == 1


def test_capped_by_the_ceiling_and_never_below_one():
    assert talking_capacity({1: 100.0, 2: 100.0, 8: 100.0}, ceiling=4) == 4
    assert talking_capacity({1: 100.0, 2: 500.0}, ceiling=4) == 1
    assert talking_capacity({1: 100.0}, ceiling=0) == 1


def test_without_a_lone_step_the_ceiling_stands():
    assert talking_capacity({}, ceiling=4) == 4
    assert talking_capacity({2: 150.0, 4: 227.0}, ceiling=3) == 3


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
