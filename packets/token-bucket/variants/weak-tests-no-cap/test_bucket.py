"""Tests for bucket.py. Run with: python3 -m unittest -q test_bucket"""

from __future__ import annotations

import math
import unittest
from unittest import mock

from bucket import ManualClock, TokenBucket


def _wall_clock_forbidden(*args, **kwargs):
    raise AssertionError("the bucket read the real clock")


class Burst(unittest.TestCase):
    def test_new_bucket_allows_a_burst_up_to_capacity(self):
        bucket = TokenBucket(rate_per_sec=1.0, capacity=3.0, clock=ManualClock())
        self.assertEqual([bucket.allow() for _ in range(4)], [True, True, True, False])

    def test_whole_capacity_in_one_request(self):
        bucket = TokenBucket(1.0, 4.0, ManualClock())
        self.assertTrue(bucket.allow(4.0))
        self.assertFalse(bucket.allow(0.25))


class Refill(unittest.TestCase):
    def setUp(self):
        self.clock = ManualClock(100.0)

    def drained(self, rate, capacity):
        bucket = TokenBucket(rate, capacity, self.clock)
        self.assertTrue(bucket.allow(capacity))
        return bucket

    def test_refill_after_exact_elapsed_time(self):
        bucket = self.drained(rate=2.0, capacity=2.0)
        self.clock.advance(0.5)  # exactly one token at 2/s
        self.assertTrue(bucket.allow(1.0))
        self.assertFalse(bucket.allow(0.125))

    def test_refill_is_continuous_not_whole_tokens(self):
        bucket = self.drained(rate=1.0, capacity=1.0)
        for _ in range(3):
            self.clock.advance(0.25)
            self.assertFalse(bucket.allow(1.0))
        self.clock.advance(0.25)
        self.assertTrue(bucket.allow(1.0))

    def test_fractional_request_after_fractional_wait(self):
        bucket = self.drained(rate=1.0, capacity=2.0)
        self.clock.advance(0.5)
        self.assertTrue(bucket.allow(0.5))
        self.assertFalse(bucket.allow(0.125))

    def test_refill_adds_to_what_is_left(self):
        bucket = TokenBucket(1.0, 4.0, self.clock)
        self.assertTrue(bucket.allow(3.0))  # one token left
        self.clock.advance(1.0)  # two now
        self.assertTrue(bucket.allow(2.0))
        self.assertFalse(bucket.allow(0.5))

    def test_no_time_no_tokens(self):
        bucket = self.drained(rate=5.0, capacity=2.0)
        self.assertFalse(bucket.allow(0.5))
        self.assertFalse(bucket.allow(0.5))


class Rejection(unittest.TestCase):
    def test_empty_bucket_rejects(self):
        bucket = TokenBucket(1.0, 2.0, ManualClock())
        self.assertTrue(bucket.allow(2.0))
        self.assertFalse(bucket.allow())

    def test_oversize_request_takes_nothing(self):
        bucket = TokenBucket(1.0, 3.0, ManualClock())
        self.assertTrue(bucket.allow(1.0))  # two left
        self.assertFalse(bucket.allow(5.0))  # bigger than the bucket
        self.assertTrue(bucket.allow(2.0))  # the two are still there
        self.assertFalse(bucket.allow(0.125))

    def test_oversize_on_a_full_bucket_leaves_it_full(self):
        bucket = TokenBucket(1.0, 2.0, ManualClock())
        self.assertFalse(bucket.allow(2.5))
        self.assertTrue(bucket.allow(2.0))


class Validation(unittest.TestCase):
    bad_numbers = (-1.0, math.nan, math.inf, -math.inf)

    def test_bad_rate_raises(self):
        for value in self.bad_numbers:
            with self.subTest(rate=value), self.assertRaises(ValueError):
                TokenBucket(value, 1.0, ManualClock())

    def test_bad_capacity_raises(self):
        for value in self.bad_numbers + (0.0,):
            with self.subTest(capacity=value), self.assertRaises(ValueError):
                TokenBucket(1.0, value, ManualClock())

    def test_bad_n_raises_and_takes_nothing(self):
        bucket = TokenBucket(1.0, 1.0, ManualClock())
        for value in self.bad_numbers:
            with self.subTest(n=value), self.assertRaises(ValueError):
                bucket.allow(value)
        self.assertTrue(bucket.allow(1.0))

    def test_zero_rate_and_zero_n_are_normal_inputs(self):
        clock = ManualClock()
        bucket = TokenBucket(0.0, 1.0, clock)
        self.assertTrue(bucket.allow(0.0))
        self.assertTrue(bucket.allow(1.0))
        clock.advance(1000.0)
        self.assertFalse(bucket.allow(1.0))

    def test_manual_clock_refuses_to_go_back(self):
        with self.assertRaises(ValueError):
            ManualClock().advance(-0.5)


class FrozenTime(unittest.TestCase):
    def test_bucket_never_reads_the_real_clock(self):
        names = ("time", "monotonic", "perf_counter", "time_ns", "monotonic_ns", "perf_counter_ns")
        with mock.patch.multiple("time", **{name: _wall_clock_forbidden for name in names}):
            clock = ManualClock()
            bucket = TokenBucket(2.0, 2.0, clock)
            self.assertTrue(bucket.allow(2.0))
            clock.advance(0.5)
            self.assertTrue(bucket.allow(1.0))
            self.assertFalse(bucket.allow(1.0))

    def test_same_clock_trace_gives_same_answers(self):
        def replay():
            clock = ManualClock()
            bucket = TokenBucket(3.0, 2.0, clock)
            answers = []
            for step, n in [(0.0, 1.5), (0.25, 1.0), (0.125, 0.5), (1.0, 2.0), (0.0, 0.25)]:
                clock.advance(step)
                answers.append(bucket.allow(n))
            return answers

        self.assertEqual(replay(), replay())


if __name__ == "__main__":
    unittest.main()
