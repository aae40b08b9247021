// Tests for src/bucket.ts, run by Node's test runner (npm test).
import { describe, test } from "node:test";
import assert from "node:assert/strict";

import { ManualClock, TokenBucket } from "../src/bucket";

function drained(rate: number, capacity: number, clock = new ManualClock(100)): TokenBucket {
  const bucket = new TokenBucket(rate, capacity, clock);
  assert.equal(bucket.allow(capacity), true);
  return bucket;
}

describe("burst", () => {
  test("a new bucket allows a request", () => {
    const bucket = new TokenBucket(1, 3, new ManualClock());
    assert.equal(bucket.allow(), true);
  });

  test("an empty bucket rejects", () => {
    const bucket = new TokenBucket(1, 2, new ManualClock());
    assert.equal(bucket.allow(2), true);
    assert.equal(bucket.allow(), false);
  });

  test("time brings tokens back", () => {
    const clock = new ManualClock();
    const bucket = drained(1, 1, clock);
    clock.advance(5);
    assert.equal(bucket.allow(), true);
  });

  test("a bad rate throws RangeError", () => {
    assert.throws(() => new TokenBucket(-1, 1, new ManualClock()), RangeError);
  });
});
