"""Tests for bucket.py."""

import unittest

from bucket import ManualClock, TokenBucket


class TokenBucketTests(unittest.TestCase):
    def test_allows_a_burst(self):
        bucket = TokenBucket(1.0, 3.0, ManualClock())
        self.assertTrue(bucket.allow())
        self.assertTrue(bucket.allow())
        self.assertTrue(bucket.allow())

    def test_rejects_when_empty(self):
        bucket = TokenBucket(1.0, 1.0, ManualClock())
        self.assertTrue(bucket.allow())
        self.assertFalse(bucket.allow())

    def test_refills_after_a_second(self):
        clock = ManualClock()
        bucket = TokenBucket(1.0, 1.0, clock)
        self.assertTrue(bucket.allow())
        clock.advance(1.0)
        self.assertTrue(bucket.allow())

    def test_negative_n_raises(self):
        with self.assertRaises(ValueError):
            TokenBucket(1.0, 1.0, ManualClock()).allow(-1.0)


if __name__ == "__main__":
    unittest.main()
