import { it } from "node:test";
import * as assert from "node:assert";
import { ManualClock, TokenBucket } from "../src/bucket";

it("serves a burst up to capacity then refuses", () => {
  const b = new TokenBucket(2, 3, new ManualClock());
  assert.strictEqual(b.allow(), true);
  assert.strictEqual(b.allow(2), true);
  assert.strictEqual(b.allow(0.5), false);
});

it("refills exactly: 0.5 s at 2/s is one token, not more", () => {
  const c = new ManualClock(10);
  const b = new TokenBucket(2, 2, c);
  b.allow(2);
  c.advance(0.5);
  assert.strictEqual(b.allow(1), true);
  assert.strictEqual(b.allow(0.1), false);
});

it("keeps fractions of tokens", () => {
  const c = new ManualClock();
  const b = new TokenBucket(1, 1, c);
  b.allow(1);
  c.advance(0.375);
  c.advance(0.375);
  assert.strictEqual(b.allow(0.5), true);
  assert.strictEqual(b.allow(0.5), false);
  c.advance(0.25);
  assert.strictEqual(b.allow(0.5), true);
});

it("refills on top of what remains and never past capacity", () => {
  const c = new ManualClock();
  const b = new TokenBucket(1, 5, c);
  b.allow(4);
  c.advance(2);
  assert.strictEqual(b.allow(3), true);
  assert.strictEqual(b.allow(0.5), false);
  c.advance(1000);
  assert.strictEqual(b.allow(5), true);
  assert.strictEqual(b.allow(0.5), false);
});

it("an oversize request is refused and costs nothing", () => {
  const b = new TokenBucket(1, 2, new ManualClock());
  assert.strictEqual(b.allow(1), true);
  assert.strictEqual(b.allow(9), false);
  assert.strictEqual(b.allow(1), true);
  assert.strictEqual(b.allow(0.1), false);
});

it("rejects bad numbers with RangeError", () => {
  const c = new ManualClock();
  for (const bad of [-2, NaN, Infinity]) {
    assert.throws(() => new TokenBucket(bad, 1, c), RangeError);
    assert.throws(() => new TokenBucket(1, bad, c), RangeError);
    assert.throws(() => new TokenBucket(1, 1, c).allow(bad), RangeError);
  }
  assert.throws(() => new TokenBucket(1, 0, c), RangeError);
  assert.doesNotThrow(() => new TokenBucket(0, 1, c).allow(0));
});

it("does not look at the wall clock", (t) => {
  t.mock.method(Date, "now", () => assert.fail("Date.now called"));
  t.mock.method(performance, "now", () => assert.fail("performance.now called"));
  const c = new ManualClock();
  const b = new TokenBucket(4, 1, c);
  assert.strictEqual(b.allow(1), true);
  c.advance(0.25);
  assert.strictEqual(b.allow(1), true);
});
