import math
import time
import unittest
from unittest import mock

from bucket import Clock, ManualClock, TokenBucket


def fresh(rate, capacity, start=0.0) -> "tuple[Clock, TokenBucket]":
    clock = ManualClock(start)
    return clock, TokenBucket(rate, capacity, clock)


def emptied(rate, capacity):
    clock, bucket = fresh(rate, capacity)
    assert bucket.allow(capacity), "a new bucket should serve its whole capacity"
    return clock, bucket


class JumpClock:
    """Satisfies Clock; the test moves `at` by hand, backwards too."""

    def __init__(self, at):
        self.at = at

    def now(self):
        return self.at

    def advance(self, seconds):
        self.at += seconds


class TokenBucketBehaviour(unittest.TestCase):
    # --- ManualClock -------------------------------------------------------

    def test_manual_clock_reads_start_and_moves_forward(self):
        self.assertEqual(ManualClock().now(), 0.0)
        clock = ManualClock(start=-2.0)
        clock.advance(0.5)
        clock.advance(0.0)
        clock.advance(3)
        self.assertEqual(clock.now(), 1.5)

    def test_manual_clock_refuses_bad_steps(self):
        clock = ManualClock(1.0)
        for step in (-0.1, -5, math.nan, math.inf, -math.inf):
            with self.subTest(step=step):
                self.assertRaises(ValueError, clock.advance, step)
        self.assertEqual(clock.now(), 1.0)

    # --- burst, empty, oversize ------------------------------------------

    def test_burst_up_to_capacity_then_nothing(self):
        _, bucket = fresh(0.5, 3)
        results = [bucket.allow() for _ in range(4)]
        self.assertEqual(results, [True, True, True, False])

    def test_a_single_request_of_exactly_capacity_fits(self):
        _, bucket = fresh(1, 7.5)
        self.assertTrue(bucket.allow(7.5))
        self.assertFalse(bucket.allow(0.1))

    def test_empty_bucket_rejects(self):
        _, bucket = emptied(2, 4)
        self.assertFalse(bucket.allow())
        self.assertFalse(bucket.allow(0.001))

    def test_failed_request_leaves_tokens_in_place(self):
        _, bucket = fresh(0, 3)
        self.assertTrue(bucket.allow(2))
        for _ in range(3):
            self.assertFalse(bucket.allow(1.25))
        self.assertTrue(bucket.allow(1))
        self.assertFalse(bucket.allow(0.001))

    def test_request_above_capacity_is_refused_and_costs_nothing(self):
        clock, bucket = fresh(100, 2)
        self.assertFalse(bucket.allow(2.5))
        clock.advance(60)
        self.assertFalse(bucket.allow(20))
        self.assertTrue(bucket.allow(2))

    def test_request_of_zero_is_allowed_even_when_empty(self):
        _, bucket = emptied(0, 1)
        self.assertTrue(bucket.allow(0))
        self.assertFalse(bucket.allow(0.5))

    # --- refill ------------------------------------------------------------

    def test_exact_refill_table(self):
        # (rate, seconds waited, tokens that must be there, a bit more that must not)
        table = [
            (2.0, 0.5, 1.0, 1.01),     # half a second at 2/s is one token
            (1.0, 0.25, 0.25, 0.3),    # quarter second at 1/s is a quarter token
            (4.0, 0.125, 0.5, 0.51),
            (1.0, 1.5, 1.5, 1.6),
            (0.5, 3.0, 1.5, 1.51),
        ]
        for rate, waited, there, too_much in table:
            with self.subTest(rate=rate, waited=waited):
                clock, bucket = emptied(rate, 10)
                clock.advance(waited)
                self.assertFalse(bucket.allow(too_much))
                self.assertTrue(bucket.allow(there))
                self.assertFalse(bucket.allow(0.001))

    def test_refill_in_small_steps_adds_up_once(self):
        clock, bucket = emptied(1, 5)
        clock.advance(0.25)
        self.assertFalse(bucket.allow(1))
        clock.advance(0.25)
        self.assertFalse(bucket.allow(1))
        clock.advance(0.5)
        self.assertTrue(bucket.allow(1))
        self.assertFalse(bucket.allow(0.001))

    def test_refill_never_goes_past_capacity(self):
        clock, bucket = emptied(3, 2)
        clock.advance(50)
        self.assertFalse(bucket.allow(2.01))
        self.assertTrue(bucket.allow(2))
        self.assertFalse(bucket.allow(0.001))

    def test_rate_zero_means_no_refill(self):
        clock, bucket = emptied(0, 2)
        clock.advance(10**6)
        self.assertFalse(bucket.allow(0.001))

    def test_clock_going_backwards_adds_no_tokens_and_takes_none(self):
        clock = JumpClock(50.0)
        bucket = TokenBucket(1, 4, clock)
        self.assertTrue(bucket.allow(3))
        clock.at = 40.0
        self.assertFalse(bucket.allow(1.5))
        self.assertTrue(bucket.allow(1))
        self.assertFalse(bucket.allow(0.001))

    def test_same_script_same_answers(self):
        script = [(0, 1), (0.5, 1), (0, 1), (0.75, 0.5), (0.25, 2), (0, 0), (10, 4), (0, 0.1)]

        def replay():
            clock, bucket = fresh(1, 3)
            out = []
            for step, n in script:
                clock.advance(step)
                out.append(bucket.allow(n))
            return out

        self.assertEqual(replay(), replay())
        self.assertEqual(replay(), [True, True, True, True, False, True, False, True])

    # --- ValueError ----------------------------------------------------------

    def test_invalid_numbers_raise(self):
        bad = (-1, -0.25, math.nan, math.inf, -math.inf)
        for x in bad:
            with self.subTest(rate=x):
                self.assertRaises(ValueError, TokenBucket, x, 1, ManualClock())
            with self.subTest(capacity=x):
                self.assertRaises(ValueError, TokenBucket, 1, x, ManualClock())
            with self.subTest(n=x):
                _, bucket = fresh(1, 2)
                self.assertRaises(ValueError, bucket.allow, x)
                self.assertTrue(bucket.allow(2))
        for zero in (0, 0.0):
            with self.subTest(capacity=zero):
                self.assertRaises(ValueError, TokenBucket, 1, zero, ManualClock())

    def test_zero_rate_and_zero_request_are_normal(self):
        _, bucket = fresh(0, 1)
        self.assertTrue(bucket.allow(0))
        self.assertTrue(bucket.allow(1))

    # --- time source -----------------------------------------------------------

    def test_real_clock_is_never_read(self):
        def boom(*_a, **_k):
            raise AssertionError("real clock read")

        names = ["time", "time_ns", "monotonic", "monotonic_ns", "perf_counter",
                 "perf_counter_ns", "sleep"]
        with mock.patch.multiple(time, **{name: boom for name in names}):
            clock, bucket = fresh(4, 1, start=7.0)
            self.assertTrue(bucket.allow(1))
            self.assertFalse(bucket.allow(0.5))
            clock.advance(0.125)
            self.assertTrue(bucket.allow(0.5))

    def test_only_the_injected_clock_refills(self):
        # At a billion tokens a second, any real time slipping in would refill the bucket.
        _, bucket = emptied(1e9, 1)
        self.assertEqual({bucket.allow(1) for _ in range(200)}, {False})


if __name__ == "__main__":
    unittest.main()
