"""Behavioural tests for bucket.py: public interface only, frozen clock only.

Each scenario is a table of (seconds to advance, tokens asked, expected answer)
steps replayed against a fresh bucket, so a reader can check the arithmetic by
hand. All amounts are binary fractions (halves, quarters, eighths) so that any
correct float implementation gives exactly these answers.
"""
import math
import time
import unittest
from unittest import mock

from bucket import Clock, ManualClock, TokenBucket


def replay(rate, capacity, steps, start=0.0):
    clock = ManualClock(start)
    bucket = TokenBucket(rate, capacity, clock)
    answers = []
    for seconds, n, _expected in steps:
        if seconds:
            clock.advance(seconds)
        answers.append(bucket.allow(n))
    return answers


class Scenarios(unittest.TestCase):
    TABLE = {
        "burst up to capacity, then empty": (
            1.0, 3.0,
            [(0, 1, True), (0, 1, True), (0, 1, True), (0, 1, False)],
        ),
        "half a second at 2/s is exactly one token": (
            2.0, 2.0,
            [(0, 2, True), (0.5, 1, True), (0, 0.125, False)],
        ),
        "a quarter second at 1/s is a quarter token": (
            1.0, 1.0,
            [(0, 1, True), (0.25, 0.5, False), (0, 0.25, True), (0, 0.125, False)],
        ),
        "fractions of a second add up": (
            4.0, 1.0,
            [(0, 1, True), (0.125, 1, False), (0.125, 1, True)],
        ),
        "refill adds to the remaining tokens": (
            1.0, 4.0,
            [(0, 2.5, True), (1.0, 2.75, False), (0, 2.5, True), (0, 0.125, False)],
        ),
        "refill stops at capacity": (
            100.0, 2.0,
            [(0, 0.5, True), (30, 2, True), (0, 0.125, False)],
        ),
        "oversize request is refused and takes nothing": (
            1.0, 2.0,
            [(0, 2.5, False), (0, 2, True)],
        ),
        "refused request leaves the level alone": (
            1.0, 2.0,
            [(0, 1.5, True), (0, 0.75, False), (0, 0.5, True)],
        ),
        "zero rate never refills": (
            0.0, 1.0,
            [(0, 1, True), (500, 0.125, False)],
        ),
        "n == 0 is always allowed, even when empty": (
            1.0, 1.0,
            [(0, 1, True), (0, 0, True)],
        ),
        "clock origin does not matter": (
            1.0, 1.0,
            [(0, 1, True), (0.5, 0.5, True), (0, 0.125, False)],
        ),
    }

    def test_table(self):
        for name, (rate, capacity, steps) in self.TABLE.items():
            with self.subTest(name):
                expected = [want for _s, _n, want in steps]
                self.assertEqual(replay(rate, capacity, steps, start=1000.0), expected)

    def test_same_inputs_same_answers(self):
        steps = [(0, 1, None), (0.25, 0.5, None), (0.5, 2, None), (3, 1.5, None)]
        self.assertEqual(replay(2.0, 2.0, steps), replay(2.0, 2.0, steps))


class BackwardsClock(unittest.TestCase):
    def test_an_earlier_reading_adds_nothing(self):
        readings = iter([50.0, 40.0, 40.0])

        class Scripted:
            def now(self):
                return next(readings)

            def advance(self, seconds):
                raise AssertionError("not used")

        bucket = TokenBucket(1.0, 1.0, Scripted())   # reads 50
        self.assertTrue(bucket.allow(1.0))             # reads 40: nothing added
        self.assertFalse(bucket.allow(0.125))          # reads 40 again


class Validation(unittest.TestCase):
    BAD_NUMBERS = (-1.0, -0.125, math.nan, math.inf, -math.inf)

    def test_rate_and_capacity(self):
        for bad in self.BAD_NUMBERS:
            with self.subTest(rate=bad), self.assertRaises(ValueError):
                TokenBucket(bad, 1.0, ManualClock())
            with self.subTest(capacity=bad), self.assertRaises(ValueError):
                TokenBucket(1.0, bad, ManualClock())
        with self.assertRaises(ValueError):
            TokenBucket(1.0, 0.0, ManualClock())

    def test_request_size(self):
        bucket = TokenBucket(1.0, 2.0, ManualClock())
        for bad in self.BAD_NUMBERS:
            with self.subTest(n=bad), self.assertRaises(ValueError):
                bucket.allow(bad)
        self.assertTrue(bucket.allow(2.0))

    def test_normal_inputs_do_not_raise(self):
        bucket = TokenBucket(0.0, 0.5, ManualClock())
        self.assertTrue(bucket.allow(0))
        self.assertTrue(bucket.allow(0.5))

    def test_manual_clock_advance(self):
        clock: Clock = ManualClock(3.0)
        for bad in self.BAD_NUMBERS:
            with self.subTest(seconds=bad), self.assertRaises(ValueError):
                clock.advance(bad)
        clock.advance(0.25)
        self.assertEqual(clock.now(), 3.25)


class FrozenTime(unittest.TestCase):
    """The real clock is booby-trapped for every test here."""

    def setUp(self):
        def trap(*_args, **_kwargs):
            raise AssertionError("real clock read")

        for name in ("time", "monotonic", "perf_counter", "time_ns", "monotonic_ns"):
            patcher = mock.patch.object(time, name, trap)
            patcher.start()
            self.addCleanup(patcher.stop)

    def test_allow_and_refill_use_only_the_injected_clock(self):
        clock = ManualClock()
        bucket = TokenBucket(2.0, 1.0, clock)
        self.assertTrue(bucket.allow())
        self.assertFalse(bucket.allow())
        clock.advance(0.5)
        self.assertTrue(bucket.allow())

    def test_no_refill_while_the_injected_clock_stands_still(self):
        bucket = TokenBucket(1000.0, 1.0, ManualClock())
        self.assertTrue(bucket.allow())
        self.assertFalse(bucket.allow(0.125))


if __name__ == "__main__":
    unittest.main()
