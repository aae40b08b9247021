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
  test("a new bucket allows a burst up to capacity", () => {
    const bucket = new TokenBucket(1, 3, new ManualClock());
    assert.deepEqual([1, 2, 3, 4].map(() => bucket.allow()), [true, true, true, false]);
  });

  test("the whole capacity in one request", () => {
    const bucket = new TokenBucket(1, 4, new ManualClock());
    assert.equal(bucket.allow(4), true);
    assert.equal(bucket.allow(0.25), false);
  });
});

describe("refill", () => {
  test("after an exact elapsed time", () => {
    const clock = new ManualClock(100);
    const bucket = drained(2, 2, clock);
    clock.advance(0.5); // exactly one token at 2/s
    assert.equal(bucket.allow(1), true);
    assert.equal(bucket.allow(0.125), false);
  });

  test("is continuous, not whole tokens", () => {
    const clock = new ManualClock(100);
    const bucket = drained(1, 1, clock);
    for (let i = 0; i < 3; i++) {
      clock.advance(0.25);
      assert.equal(bucket.allow(1), false);
    }
    clock.advance(0.25);
    assert.equal(bucket.allow(1), true);
  });

  test("a fractional request after a fractional wait", () => {
    const clock = new ManualClock(100);
    const bucket = drained(1, 2, clock);
    clock.advance(0.5);
    assert.equal(bucket.allow(0.5), true);
    assert.equal(bucket.allow(0.125), false);
  });

  test("adds to what is left", () => {
    const clock = new ManualClock();
    const bucket = new TokenBucket(1, 4, clock);
    assert.equal(bucket.allow(3), true); // one left
    clock.advance(1); // two now
    assert.equal(bucket.allow(2), true);
    assert.equal(bucket.allow(0.5), false);
  });

  test("is capped at capacity", () => {
    const clock = new ManualClock(100);
    const bucket = drained(10, 3, clock);
    clock.advance(60);
    assert.equal(bucket.allow(3), true);
    assert.equal(bucket.allow(0.5), false);
  });

  test("no time, no tokens", () => {
    const bucket = drained(5, 2);
    assert.equal(bucket.allow(0.5), false);
    assert.equal(bucket.allow(0.5), false);
  });
});

describe("rejection", () => {
  test("an empty bucket rejects", () => {
    const bucket = new TokenBucket(1, 2, new ManualClock());
    assert.equal(bucket.allow(2), true);
    assert.equal(bucket.allow(), false);
  });

  test("an oversize request takes nothing", () => {
    const bucket = new TokenBucket(1, 3, new ManualClock());
    assert.equal(bucket.allow(1), true); // two left
    assert.equal(bucket.allow(5), false); // bigger than the bucket
    assert.equal(bucket.allow(2), true); // the two are still there
    assert.equal(bucket.allow(0.125), false);
  });

  test("an oversize request on a full bucket leaves it full", () => {
    const bucket = new TokenBucket(1, 2, new ManualClock());
    assert.equal(bucket.allow(2.5), false);
    assert.equal(bucket.allow(2), true);
  });
});

describe("validation", () => {
  const bad = [-1, NaN, Infinity, -Infinity];

  test("a bad rate throws RangeError", () => {
    for (const value of bad) {
      assert.throws(() => new TokenBucket(value, 1, new ManualClock()), RangeError, `rate ${value}`);
    }
  });

  test("a bad capacity throws RangeError", () => {
    for (const value of [...bad, 0]) {
      assert.throws(() => new TokenBucket(1, value, new ManualClock()), RangeError, `capacity ${value}`);
    }
  });

  test("a bad n throws and takes nothing", () => {
    const bucket = new TokenBucket(1, 1, new ManualClock());
    for (const value of bad) {
      assert.throws(() => bucket.allow(value), RangeError, `n ${value}`);
    }
    assert.equal(bucket.allow(1), true);
  });

  test("a zero rate and a zero n are normal inputs", () => {
    const clock = new ManualClock();
    const bucket = new TokenBucket(0, 1, clock);
    assert.equal(bucket.allow(0), true);
    assert.equal(bucket.allow(1), true);
    clock.advance(1000);
    assert.equal(bucket.allow(1), false);
  });

  test("the manual clock refuses to go back", () => {
    assert.throws(() => new ManualClock().advance(-0.5), RangeError);
  });
});

describe("frozen time", () => {
  test("the bucket never reads the real clock", (t) => {
    const forbidden = () => {
      throw new Error("the bucket read the real clock");
    };
    t.mock.method(Date, "now", forbidden);
    t.mock.method(performance, "now", forbidden);
    const clock = new ManualClock();
    const bucket = new TokenBucket(2, 2, clock);
    assert.equal(bucket.allow(2), true);
    clock.advance(0.5);
    assert.equal(bucket.allow(1), true);
    assert.equal(bucket.allow(1), false);
  });

  test("the same clock trace gives the same answers", () => {
    const replay = () => {
      const clock = new ManualClock();
      const bucket = new TokenBucket(3, 2, clock);
      const steps: Array<[number, number]> = [[0, 1.5], [0.25, 1], [0.125, 0.5], [1, 2], [0, 0.25]];
      return steps.map(([dt, n]) => {
        clock.advance(dt);
        return bucket.allow(n);
      });
    };
    assert.deepEqual(replay(), replay());
    assert.deepEqual(replay(), [true, true, true, true, false]);
  });
});
