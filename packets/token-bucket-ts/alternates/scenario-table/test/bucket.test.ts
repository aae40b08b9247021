import { describe, it } from "node:test";
import assert from "node:assert";

import { Clock, ManualClock, TokenBucket } from "../src/bucket";

type Step = { wait?: number; take: number; expect: boolean };

const scenarios: Array<{ name: string; rate: number; capacity: number; steps: Step[] }> = [
  { name: "burst up to capacity", rate: 1, capacity: 3, steps: [{ take: 1, expect: true }, { take: 1, expect: true }, { take: 1, expect: true }, { take: 1, expect: false }] },
  { name: "refill after exact elapsed time", rate: 2, capacity: 2, steps: [{ take: 2, expect: true }, { wait: 0.5, take: 1, expect: true }, { take: 0.25, expect: false }] },
  { name: "fractional tokens accumulate", rate: 1, capacity: 1, steps: [{ take: 1, expect: true }, { wait: 0.25, take: 1, expect: false }, { wait: 0.25, take: 1, expect: false }, { wait: 0.25, take: 0.75, expect: true }] },
  { name: "refill adds to the remainder", rate: 1, capacity: 4, steps: [{ take: 3, expect: true }, { wait: 1, take: 2, expect: true }, { take: 0.5, expect: false }] },
  { name: "refill is capped", rate: 10, capacity: 2, steps: [{ take: 2, expect: true }, { wait: 100, take: 2, expect: true }, { take: 0.5, expect: false }] },
  { name: "empty bucket rejects", rate: 1, capacity: 1, steps: [{ take: 1, expect: true }, { take: 1, expect: false }] },
  { name: "oversize takes nothing", rate: 1, capacity: 3, steps: [{ take: 1, expect: true }, { take: 4, expect: false }, { take: 2, expect: true }, { take: 0.25, expect: false }] },
];

describe("scenarios", () => {
  for (const s of scenarios) {
    it(s.name, () => {
      const clock = new ManualClock(42);
      const bucket = new TokenBucket(s.rate, s.capacity, clock);
      const got = s.steps.map((step) => {
        if (step.wait) clock.advance(step.wait);
        return bucket.allow(step.take);
      });
      assert.deepStrictEqual(got, s.steps.map((step) => step.expect));
    });
  }
});

describe("inputs", () => {
  it("throws RangeError for negative or non-finite numbers and zero capacity", () => {
    const clock: Clock = new ManualClock();
    const bad = [-0.5, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY];
    for (const v of bad) {
      assert.throws(() => new TokenBucket(v, 1, clock), RangeError);
      assert.throws(() => new TokenBucket(1, v, clock), RangeError);
      assert.throws(() => new TokenBucket(1, 1, clock).allow(v), RangeError);
    }
    assert.throws(() => new TokenBucket(1, 0, clock), RangeError);
  });

  it("accepts a zero rate and a zero request", () => {
    const clock = new ManualClock();
    const bucket = new TokenBucket(0, 1, clock);
    assert.strictEqual(bucket.allow(0), true);
    assert.strictEqual(bucket.allow(1), true);
    clock.advance(50);
    assert.strictEqual(bucket.allow(0.5), false);
  });
});

describe("time", () => {
  it("comes only from the injected clock", (t) => {
    const boom = () => {
      throw new Error("real clock read");
    };
    t.mock.method(Date, "now", boom);
    t.mock.method(performance, "now", boom);
    t.mock.method(process, "hrtime", boom);
    const clock = new ManualClock();
    const bucket = new TokenBucket(1, 1, clock);
    assert.strictEqual(bucket.allow(1), true);
    clock.advance(1);
    assert.strictEqual(bucket.allow(1), true);
  });
});
