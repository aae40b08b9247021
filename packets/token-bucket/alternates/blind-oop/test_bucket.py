"""Public-behaviour tests for bucket.py; run with `python3 -m unittest -q test_bucket`."""

import math
import time
import unittest
from unittest import mock

from bucket import Clock, ManualClock, TokenBucket

NAN = math.nan
INF = math.inf


class SettableClock:
    """A Clock whose reading the test sets directly, so it can also step backwards."""

    def __init__(self, reading: float) -> None:
        self.reading = reading

    def now(self) -> float:
        return self.reading

    def advance(self, seconds: float) -> None:
        self.reading += seconds


class BucketCase(unittest.TestCase):
    """Builds a bucket on a fresh ManualClock."""

    def make(self, rate: float, capacity: float, start: float = 0.0) -> TokenBucket:
        self.clock: Clock = ManualClock(start)
        return TokenBucket(rate, capacity, self.clock)

    def drain(self, bucket: TokenBucket, capacity: float) -> None:
        self.assertTrue(bucket.allow(capacity))
        self.assertFalse(bucket.allow(1e-6))


class TestManualClock(unittest.TestCase):
    def test_default_start_is_zero(self):
        self.assertEqual(ManualClock().now(), 0.0)

    def test_starts_at_given_reading_and_advances_by_fractions(self):
        clock = ManualClock(start=100.0)
        self.assertEqual(clock.now(), 100.0)
        clock.advance(0.25)
        clock.advance(0)
        clock.advance(1.5)
        self.assertEqual(clock.now(), 101.75)

    def test_advance_rejects_negative_and_non_finite(self):
        for bad in (-1.0, -0.001, NAN, INF, -INF):
            with self.subTest(seconds=bad):
                clock = ManualClock(5.0)
                with self.assertRaises(ValueError):
                    clock.advance(bad)
                self.assertEqual(clock.now(), 5.0)


class TestBurst(BucketCase):
    def test_new_bucket_is_full_and_serves_a_burst_up_to_capacity(self):
        bucket = self.make(rate=1.0, capacity=5)
        self.assertEqual([bucket.allow() for _ in range(6)], [True] * 5 + [False])

    def test_whole_capacity_in_one_request(self):
        bucket = self.make(rate=1.0, capacity=4)
        self.assertTrue(bucket.allow(4))
        self.assertFalse(bucket.allow(1))

    def test_fractional_capacity(self):
        bucket = self.make(rate=0.0, capacity=2.5)
        self.assertTrue(bucket.allow(2))
        self.assertFalse(bucket.allow(1))
        self.assertTrue(bucket.allow(0.5))
        self.assertFalse(bucket.allow(0.01))

    def test_rejection_when_empty(self):
        bucket = self.make(rate=1.0, capacity=3)
        self.drain(bucket, 3)
        self.assertFalse(bucket.allow())
        self.assertFalse(bucket.allow(0.5))

    def test_rejected_request_takes_nothing(self):
        bucket = self.make(rate=0.0, capacity=2)
        self.assertTrue(bucket.allow(1))
        self.assertFalse(bucket.allow(1.5))
        self.assertFalse(bucket.allow(1.5))
        self.assertTrue(bucket.allow(1))

    def test_oversize_request_is_rejected_and_takes_nothing(self):
        bucket = self.make(rate=1.0, capacity=2)
        self.assertFalse(bucket.allow(3))
        self.assertFalse(bucket.allow(2.000001))
        self.assertTrue(bucket.allow(2))

    def test_oversize_request_is_rejected_even_after_a_long_wait(self):
        bucket = self.make(rate=10.0, capacity=2)
        self.clock.advance(1000)
        self.assertFalse(bucket.allow(2.5))
        self.assertTrue(bucket.allow(2))

    def test_zero_request_is_always_allowed(self):
        bucket = self.make(rate=0.0, capacity=1)
        self.drain(bucket, 1)
        self.assertTrue(bucket.allow(0))
        self.assertTrue(bucket.allow(0.0))
        self.assertFalse(bucket.allow(1e-6))


class TestRefill(BucketCase):
    def test_half_second_at_two_per_second_is_one_token(self):
        bucket = self.make(rate=2.0, capacity=10)
        self.drain(bucket, 10)
        self.clock.advance(0.5)
        self.assertTrue(bucket.allow(1))
        self.assertFalse(bucket.allow(1e-6))

    def test_half_second_at_two_per_second_is_not_more_than_one_token(self):
        bucket = self.make(rate=2.0, capacity=10)
        self.drain(bucket, 10)
        self.clock.advance(0.5)
        self.assertFalse(bucket.allow(1.001))
        self.assertTrue(bucket.allow(1))

    def test_quarter_second_at_one_per_second_is_a_quarter_token(self):
        bucket = self.make(rate=1.0, capacity=1)
        self.drain(bucket, 1)
        self.clock.advance(0.25)
        self.assertFalse(bucket.allow(1))
        self.assertFalse(bucket.allow(0.26))
        self.assertTrue(bucket.allow(0.25))
        self.assertFalse(bucket.allow(1e-6))

    def test_refill_accumulates_across_calls_without_double_counting(self):
        bucket = self.make(rate=1.0, capacity=10)
        self.drain(bucket, 10)
        self.clock.advance(0.5)
        self.assertFalse(bucket.allow(1))
        self.clock.advance(0.5)
        self.assertTrue(bucket.allow(1))
        self.assertFalse(bucket.allow(0.01))
        self.clock.advance(1.5)
        self.assertTrue(bucket.allow(1.5))
        self.assertFalse(bucket.allow(0.01))

    def test_refill_is_capped_at_capacity(self):
        bucket = self.make(rate=1.0, capacity=3)
        self.drain(bucket, 3)
        self.clock.advance(100)
        self.assertTrue(bucket.allow(3))
        self.assertFalse(bucket.allow(0.01))

    def test_full_bucket_gains_nothing_from_waiting(self):
        bucket = self.make(rate=5.0, capacity=2)
        self.clock.advance(10)
        self.assertTrue(bucket.allow(2))
        self.assertFalse(bucket.allow(0.01))

    def test_zero_rate_never_refills(self):
        bucket = self.make(rate=0.0, capacity=1)
        self.drain(bucket, 1)
        self.clock.advance(1e6)
        self.assertFalse(bucket.allow(0.001))

    def test_no_refill_without_the_injected_clock_moving(self):
        # A huge rate turns any real time between calls into tokens.
        bucket = self.make(rate=1e9, capacity=1)
        self.drain(bucket, 1)
        for _ in range(100):
            self.assertFalse(bucket.allow(1))

    def test_clock_reading_earlier_adds_no_tokens(self):
        clock = SettableClock(10.0)
        bucket = TokenBucket(1.0, 2, clock)
        self.assertTrue(bucket.allow(1))
        clock.reading = 9.0
        self.assertFalse(bucket.allow(1.5))
        self.assertTrue(bucket.allow(1))
        self.assertFalse(bucket.allow(0.01))

    def test_same_readings_and_requests_give_the_same_answers(self):
        steps = [(0.0, 2), (0.3, 1), (0.2, 0.5), (0.0, 3), (1.7, 2), (0.05, 0.25), (4.0, 1)]

        def play():
            bucket = self.make(rate=1.5, capacity=3)
            answers = []
            for seconds, n in steps:
                self.clock.advance(seconds)
                answers.append(bucket.allow(n))
            return answers

        first = play()
        self.assertEqual(first, play())
        # 2 -> 1 left; +0.45 -> 1.45, take 1; +0.3 -> 0.75, take 0.5; 3 > 0.25;
        # +2.55 -> 2.8, take 2; +0.075 -> 0.875, take 0.25; +6 capped at 3, take 1.
        self.assertEqual(first, [True, True, True, False, True, True, True])


class TestValueErrors(unittest.TestCase):
    BAD = (-1.0, -0.5, NAN, INF, -INF)

    def test_bad_rate(self):
        for bad in self.BAD:
            with self.subTest(rate=bad), self.assertRaises(ValueError):
                TokenBucket(bad, 1.0, ManualClock())

    def test_bad_capacity(self):
        for bad in self.BAD + (0, 0.0):
            with self.subTest(capacity=bad), self.assertRaises(ValueError):
                TokenBucket(1.0, bad, ManualClock())

    def test_bad_request(self):
        bucket = TokenBucket(1.0, 5.0, ManualClock())
        for bad in self.BAD:
            with self.subTest(n=bad), self.assertRaises(ValueError):
                bucket.allow(bad)
        self.assertTrue(bucket.allow(5))

    def test_normal_edge_inputs_do_not_raise(self):
        bucket = TokenBucket(0, 1, ManualClock())
        self.assertTrue(bucket.allow(0))
        self.assertTrue(bucket.allow())
        self.assertFalse(bucket.allow())


class TestNoRealClock(unittest.TestCase):
    READERS = ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter",
               "perf_counter_ns", "process_time", "sleep")

    def test_bucket_uses_only_the_injected_clock(self):
        def forbidden(*args, **kwargs):
            raise AssertionError("the real clock was read")

        patches = [mock.patch.object(time, name, forbidden) for name in self.READERS]
        for patch in patches:
            patch.start()
            self.addCleanup(patch.stop)
        clock = ManualClock(3.0)
        bucket = TokenBucket(2.0, 2.0, clock)
        self.assertTrue(bucket.allow(2))
        self.assertFalse(bucket.allow(1))
        clock.advance(0.5)
        self.assertTrue(bucket.allow(1))
        self.assertFalse(bucket.allow(0.5))


if __name__ == "__main__":
    unittest.main()
