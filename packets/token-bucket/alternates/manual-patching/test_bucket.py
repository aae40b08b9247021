import math
import time
import unittest

from bucket import Clock, ManualClock, TokenBucket


class RealClockForbidden(unittest.TestCase):
    """Replace the real clock functions by hand for the duration of each test."""

    def setUp(self):
        self.saved = (time.time, time.monotonic, time.perf_counter)
        time.time = time.monotonic = time.perf_counter = self.real_clock_read

    def tearDown(self):
        time.time, time.monotonic, time.perf_counter = self.saved

    @staticmethod
    def real_clock_read():
        raise AssertionError("the real clock was read")

    def test_allow_and_refill_never_touch_the_real_clock(self):
        clock = ManualClock(7.0)
        bucket = TokenBucket(4.0, 2.0, clock)
        self.assertTrue(bucket.allow(2))
        self.assertFalse(bucket.allow(0.25))
        clock.advance(0.125)
        self.assertTrue(bucket.allow(0.5))


class Behaviour(unittest.TestCase):
    def setUp(self):
        self.clock = ManualClock()

    def bucket(self, rate, capacity):
        return TokenBucket(rate, capacity, self.clock)

    def test_starts_full_and_bursts_to_capacity(self):
        b = self.bucket(1, 4)
        self.assertTrue(b.allow(4))
        self.assertFalse(b.allow())

    def test_refill_fractional_seconds_and_tokens(self):
        b = self.bucket(2, 2)
        b.allow(2)
        self.clock.advance(0.5)
        self.assertTrue(b.allow(1))
        self.clock.advance(0.125)
        self.assertFalse(b.allow(0.5))
        self.assertTrue(b.allow(0.25))

    def test_refill_continues_from_what_is_left(self):
        b = self.bucket(1, 10)
        b.allow(9)
        self.clock.advance(2)
        self.assertTrue(b.allow(3))
        self.assertFalse(b.allow(0.125))

    def test_refill_caps_at_capacity(self):
        b = self.bucket(5, 2)
        b.allow(1)
        self.clock.advance(10)
        self.assertFalse(b.allow(2.5))
        self.assertTrue(b.allow(2))
        self.assertFalse(b.allow(0.125))   # 10 s at 5/s filled it to 2, not to 51

    def test_empty_bucket_rejects(self):
        b = self.bucket(0, 1)
        b.allow()
        self.clock.advance(3)
        self.assertFalse(b.allow())

    def test_oversize_takes_nothing(self):
        b = self.bucket(1, 3)
        self.assertFalse(b.allow(3.5))
        self.assertTrue(b.allow(3))

    def test_partial_reject_takes_nothing(self):
        b = self.bucket(1, 3)
        b.allow(2)
        self.assertFalse(b.allow(1.5))
        self.assertTrue(b.allow(1))

    def test_zero_is_always_allowed(self):
        b = self.bucket(0, 1)
        b.allow(1)
        self.assertTrue(b.allow(0))

    def test_value_errors(self):
        for args in [(-1, 1), (1, -1), (1, 0), (math.nan, 1), (1, math.inf), (math.inf, 1)]:
            with self.subTest(args=args):
                self.assertRaises(ValueError, TokenBucket, args[0], args[1], self.clock)
        b = self.bucket(1, 1)
        for n in (-1, math.nan, math.inf):
            with self.subTest(n=n):
                self.assertRaises(ValueError, b.allow, n)
        for s in (-0.5, math.nan, math.inf):
            with self.subTest(seconds=s):
                self.assertRaises(ValueError, self.clock.advance, s)

    def test_clock_going_back_adds_nothing(self):
        class Stepper:
            readings = [5.0, 1.0]

            def now(self):
                return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]

            def advance(self, seconds):
                pass

        b = TokenBucket(10, 1, Stepper())
        self.assertTrue(b.allow(1))
        self.assertFalse(b.allow(0.125))

    def test_manual_clock_is_a_clock(self):
        c: Clock = ManualClock(1.5)
        c.advance(0.5)
        self.assertEqual(c.now(), 2.0)


if __name__ == "__main__":
    unittest.main()
