import math
import unittest
from unittest import mock

from bucket import Clock, ManualClock, TokenBucket


def _real_clock_read(*args, **kwargs):
    raise AssertionError("the bucket read the real clock")


class BurstAndEmpty(unittest.TestCase):
    def test_new_bucket_allows_a_burst_up_to_capacity(self):
        bucket = TokenBucket(1.0, 5.0, ManualClock())
        self.assertEqual([bucket.allow() for _ in range(5)], [True] * 5)

    def test_rejects_when_empty(self):
        bucket = TokenBucket(1.0, 3.0, ManualClock())
        for _ in range(3):
            self.assertTrue(bucket.allow())
        self.assertFalse(bucket.allow())
        self.assertFalse(bucket.allow(0.5))

    def test_rejected_request_takes_nothing(self):
        bucket = TokenBucket(1.0, 2.0, ManualClock())
        self.assertTrue(bucket.allow(1.5))
        self.assertFalse(bucket.allow(1.0))   # only 0.5 left
        self.assertTrue(bucket.allow(0.5))    # the rejection left the 0.5 in place

    def test_oversize_request_takes_nothing(self):
        bucket = TokenBucket(1.0, 4.0, ManualClock())
        self.assertFalse(bucket.allow(4.5))
        self.assertTrue(bucket.allow(4.0))

    def test_zero_request_is_always_allowed(self):
        bucket = TokenBucket(0.0, 1.0, ManualClock())
        self.assertTrue(bucket.allow(1.0))
        self.assertTrue(bucket.allow(0))


class Refill(unittest.TestCase):
    def test_half_second_at_two_per_second_is_one_token(self):
        clock = ManualClock()
        bucket = TokenBucket(2.0, 2.0, clock)
        self.assertTrue(bucket.allow(2.0))
        clock.advance(0.5)
        self.assertTrue(bucket.allow(1.0))
        self.assertFalse(bucket.allow(0.125))

    def test_quarter_second_is_a_quarter_token(self):
        clock = ManualClock()
        bucket = TokenBucket(1.0, 1.0, clock)
        self.assertTrue(bucket.allow(1.0))
        clock.advance(0.25)
        self.assertFalse(bucket.allow(0.5))
        self.assertTrue(bucket.allow(0.25))
        self.assertFalse(bucket.allow(0.125))

    def test_fractions_accumulate_across_calls(self):
        clock = ManualClock()
        bucket = TokenBucket(1.0, 3.0, clock)
        self.assertTrue(bucket.allow(3.0))
        for _ in range(4):
            clock.advance(0.25)
            self.assertFalse(bucket.allow(1.5))
        self.assertTrue(bucket.allow(1.0))

    def test_refill_adds_to_what_remains(self):
        clock = ManualClock()
        bucket = TokenBucket(1.0, 4.0, clock)
        self.assertTrue(bucket.allow(3.0))   # 1 left
        clock.advance(1.0)                   # 2 now, not 4 and not 1
        self.assertFalse(bucket.allow(2.5))
        self.assertTrue(bucket.allow(2.0))
        self.assertFalse(bucket.allow(0.25))

    def test_refill_is_capped_at_capacity(self):
        clock = ManualClock()
        bucket = TokenBucket(10.0, 3.0, clock)
        self.assertTrue(bucket.allow(1.0))
        clock.advance(60.0)
        self.assertTrue(bucket.allow(3.0))
        self.assertFalse(bucket.allow(0.25))

    def test_zero_rate_never_refills(self):
        clock = ManualClock()
        bucket = TokenBucket(0.0, 1.0, clock)
        self.assertTrue(bucket.allow())
        clock.advance(1000.0)
        self.assertFalse(bucket.allow())

    def test_clock_reading_earlier_adds_nothing(self):
        class Rewind:
            def __init__(self):
                self.value = 10.0

            def now(self):
                return self.value

            def advance(self, seconds):
                self.value += seconds

        clock = Rewind()
        bucket = TokenBucket(1.0, 2.0, clock)
        self.assertTrue(bucket.allow(2.0))
        clock.value = 4.0
        self.assertFalse(bucket.allow(0.125))

    def test_same_readings_same_answers(self):
        def run():
            clock = ManualClock(100.0)
            bucket = TokenBucket(3.0, 2.0, clock)
            answers = []
            for step, n in [(0, 1), (0, 1), (0, 1), (0.25, 0.5), (0.5, 1.5), (2, 2)]:
                clock.advance(step)
                answers.append(bucket.allow(n))
            return answers

        self.assertEqual(run(), run())
        self.assertEqual(run(), [True, True, False, True, True, True])


class Rejects(unittest.TestCase):
    def test_bad_constructor_arguments(self):
        for rate, capacity in [(-1, 1), (math.nan, 1), (math.inf, 1),
                               (1, -1), (1, math.nan), (1, math.inf), (1, 0)]:
            with self.subTest(rate=rate, capacity=capacity):
                with self.assertRaises(ValueError):
                    TokenBucket(rate, capacity, ManualClock())

    def test_bad_request_sizes(self):
        bucket = TokenBucket(1.0, 1.0, ManualClock())
        for n in (-0.5, math.nan, math.inf, -math.inf):
            with self.subTest(n=n):
                with self.assertRaises(ValueError):
                    bucket.allow(n)
        self.assertTrue(bucket.allow(1.0))   # the bad calls took nothing

    def test_manual_clock_rejects_bad_advances(self):
        clock = ManualClock(5.0)
        for seconds in (-1.0, math.nan, math.inf):
            with self.subTest(seconds=seconds):
                with self.assertRaises(ValueError):
                    clock.advance(seconds)
        self.assertEqual(clock.now(), 5.0)
        clock.advance(0.5)
        self.assertEqual(clock.now(), 5.5)


class NoRealClock(unittest.TestCase):
    @mock.patch("time.time", side_effect=_real_clock_read)
    @mock.patch("time.monotonic", side_effect=_real_clock_read)
    @mock.patch("time.perf_counter", side_effect=_real_clock_read)
    def test_bucket_never_reads_the_real_clock(self, *_patched):
        clock = ManualClock()
        bucket = TokenBucket(1.0, 1.0, clock)
        self.assertTrue(bucket.allow())
        self.assertFalse(bucket.allow())
        clock.advance(1.0)
        self.assertTrue(bucket.allow())

    def test_manual_clock_is_a_clock(self):
        clock: Clock = ManualClock(2.0)
        self.assertEqual(clock.now(), 2.0)


if __name__ == "__main__":
    unittest.main()
