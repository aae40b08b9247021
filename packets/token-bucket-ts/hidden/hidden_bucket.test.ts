// Hidden checks of src/bucket.ts. They drive the bucket with a clock of
// their own, so they rely only on the TokenBucket interface from the brief
// (ManualClock has a check of its own). Test-name prefixes matter: the
// failure catalog selects on them (fractional_*, refill_whole_*,
// oversize_*, wallclock_*, no_sleep_*, burst_*).
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { ManualClock, TokenBucket } from "../src/bucket";

class StepClock {
  constructor(public t = 0) {}
  now(): number {
    return this.t;
  }
  advance(seconds: number): void {
    this.t += seconds;
  }
}

function drained(rate: number, capacity: number, start = 50): [StepClock, TokenBucket] {
  const clock = new StepClock(start);
  const bucket = new TokenBucket(rate, capacity, clock);
  assert.equal(bucket.allow(capacity), true);
  return [clock, bucket];
}

describe("burst and empty", () => {
  test("burst_one_at_a_time", () => {
    const bucket = new TokenBucket(1, 5, new StepClock());
    assert.deepEqual([0, 1, 2, 3, 4, 5].map(() => bucket.allow()), [true, true, true, true, true, false]);
  });

  test("burst_whole_capacity_at_once", () => {
    const bucket = new TokenBucket(3, 5, new StepClock());
    assert.equal(bucket.allow(5), true);
    assert.equal(bucket.allow(0.5), false);
  });

  test("empty_keeps_rejecting_without_time", () => {
    const [, bucket] = drained(4, 2);
    assert.deepEqual([bucket.allow(0.5), bucket.allow(0.5), bucket.allow(0.5)], [false, false, false]);
  });

  test("zero_rate_never_refills", () => {
    const [clock, bucket] = drained(0, 2);
    clock.advance(10_000);
    assert.equal(bucket.allow(0.5), false);
  });
});

describe("whole refill", () => {
  test("refill_whole_one_second", () => {
    const [clock, bucket] = drained(1, 3);
    clock.advance(1);
    assert.equal(bucket.allow(1), true);
    assert.equal(bucket.allow(1), false);
  });

  test("refill_whole_seconds_at_rate_two", () => {
    const [clock, bucket] = drained(2, 6);
    clock.advance(2);
    assert.equal(bucket.allow(4), true);
    assert.equal(bucket.allow(1), false);
  });

  test("refill_whole_adds_to_remaining", () => {
    const clock = new StepClock();
    const bucket = new TokenBucket(1, 5, clock);
    assert.equal(bucket.allow(3), true); // 2 left
    clock.advance(2); // 4
    assert.equal(bucket.allow(4), true);
    assert.equal(bucket.allow(1), false);
  });

  test("refill_whole_five_seconds_on_injected_clock", () => {
    const [clock, bucket] = drained(1, 10);
    clock.advance(5);
    assert.equal(bucket.allow(5), true);
    assert.equal(bucket.allow(0.5), false);
  });
});

describe("fractional refill", () => {
  test("fractional_half_second_at_rate_two", () => {
    const [clock, bucket] = drained(2, 2);
    clock.advance(0.5);
    assert.equal(bucket.allow(1), true);
    assert.equal(bucket.allow(0.25), false);
  });

  test("fractional_quarters_accumulate", () => {
    const [clock, bucket] = drained(1, 1);
    const answers: boolean[] = [];
    for (let i = 0; i < 4; i++) {
      clock.advance(0.25);
      answers.push(bucket.allow(1));
    }
    assert.deepEqual(answers, [false, false, false, true]);
  });

  test("fractional_request_after_fractional_wait", () => {
    const [clock, bucket] = drained(1, 3);
    clock.advance(0.75);
    assert.equal(bucket.allow(0.5), true);
    assert.equal(bucket.allow(0.25), true);
    assert.equal(bucket.allow(0.125), false);
  });

  test("fractional_slow_rate", () => {
    const [clock, bucket] = drained(0.5, 2);
    clock.advance(1); // half a token
    assert.equal(bucket.allow(0.5), true);
    assert.equal(bucket.allow(0.125), false);
  });

  test("fractional_tiny_steps_add_up", () => {
    const [clock, bucket] = drained(8, 1);
    for (let i = 0; i < 7; i++) {
      clock.advance(0.015625); // 1/64 s = 1/8 token each
    }
    assert.equal(bucket.allow(1), false);
    clock.advance(0.015625);
    assert.equal(bucket.allow(1), true);
  });
});

describe("cap", () => {
  test("cap_after_long_idle", () => {
    const [clock, bucket] = drained(5, 3);
    clock.advance(3600);
    assert.equal(bucket.allow(3), true);
    assert.equal(bucket.allow(0.25), false);
  });

  test("cap_new_bucket_starts_full_not_fuller", () => {
    const clock = new StepClock();
    const bucket = new TokenBucket(1, 2, clock);
    clock.advance(10);
    assert.equal(bucket.allow(2), true);
    assert.equal(bucket.allow(0.5), false);
  });
});

describe("oversize", () => {
  test("oversize_on_full_bucket", () => {
    const bucket = new TokenBucket(1, 2, new StepClock());
    assert.equal(bucket.allow(3), false);
    assert.equal(bucket.allow(2), true);
  });

  test("oversize_keeps_partial_tokens", () => {
    const bucket = new TokenBucket(1, 4, new StepClock());
    assert.equal(bucket.allow(1.5), true);
    assert.equal(bucket.allow(5), false);
    assert.equal(bucket.allow(2.5), true);
    assert.equal(bucket.allow(0.125), false);
  });

  test("oversize_repeated_rejects_leak_nothing", () => {
    const bucket = new TokenBucket(1, 3, new StepClock());
    assert.deepEqual([0, 1, 2, 3, 4].map(() => bucket.allow(3.5)), [false, false, false, false, false]);
    assert.equal(bucket.allow(3), true);
  });
});

describe("validation", () => {
  const bad = [-1, -0.001, NaN, Infinity, -Infinity];

  test("bad_rate", () => {
    for (const value of bad) {
      assert.throws(() => new TokenBucket(value, 1, new StepClock()), RangeError, `rate ${value}`);
    }
  });

  test("bad_capacity", () => {
    for (const value of [...bad, 0]) {
      assert.throws(() => new TokenBucket(1, value, new StepClock()), RangeError, `capacity ${value}`);
    }
  });

  test("bad_n", () => {
    const bucket = new TokenBucket(1, 1, new StepClock());
    for (const value of bad) {
      assert.throws(() => bucket.allow(value), RangeError, `n ${value}`);
    }
    assert.equal(bucket.allow(1), true);
  });

  test("zero_n_is_allowed", () => {
    const [, bucket] = drained(1, 1);
    assert.equal(bucket.allow(0), true);
  });

  test("zero_rate_is_allowed", () => {
    assert.doesNotThrow(() => new TokenBucket(0, 1, new StepClock()));
  });
});

describe("clock discipline", () => {
  test("wallclock_never_read", (t) => {
    // Only asks whether the real clock was read; the answers themselves are
    // judged by the refill checks.
    const reads: string[] = [];
    const RealDate = Date;
    class SpyDate extends RealDate {
      constructor(...args: []) {
        if (args.length === 0) reads.push("new Date()");
        super(...args);
      }
      static now(): number {
        reads.push("Date.now");
        return 0;
      }
    }
    t.mock.method(performance, "now", () => {
      reads.push("performance.now");
      return 0;
    });
    t.mock.method(process, "hrtime", () => {
      reads.push("process.hrtime");
      return [0, 0];
    });
    globalThis.Date = SpyDate as DateConstructor;
    try {
      const clock = new StepClock(7);
      const bucket = new TokenBucket(2, 2, clock);
      bucket.allow(2);
      bucket.allow(1);
      clock.advance(0.5);
      bucket.allow(1);
      bucket.allow(5);
    } finally {
      globalThis.Date = RealDate;
    }
    assert.deepEqual(reads, [], `src/bucket.ts read ${[...new Set(reads)].join(", ")}`);
  });

  test("backwards_clock_adds_nothing", () => {
    const [clock, bucket] = drained(1, 2, 10);
    clock.t = 4;
    assert.equal(bucket.allow(0.5), false);
  });

  test("deterministic_on_the_same_trace", () => {
    const replay = () => {
      const clock = new StepClock(3);
      const bucket = new TokenBucket(1.5, 3, clock);
      const steps: Array<[number, number]> = [[0, 2], [0.5, 1], [0.25, 0.5], [2, 3], [0, 0.5], [1, 1.5]];
      return steps.map(([dt, n]) => {
        clock.advance(dt);
        return bucket.allow(n);
      });
    };
    assert.deepEqual(replay(), replay());
  });

  test("no_sleep_on_any_path", (t) => {
    const explode = () => {
      throw new Error("src/bucket.ts waited (a timer or Atomics.wait)");
    };
    t.mock.method(globalThis, "setTimeout", explode);
    t.mock.method(globalThis, "setInterval", explode);
    t.mock.method(globalThis, "setImmediate", explode);
    t.mock.method(Atomics, "wait", explode);
    const clock = new StepClock();
    const bucket = new TokenBucket(1, 2, clock);
    const answers = [bucket.allow(2), bucket.allow(1), bucket.allow(5)];
    clock.advance(0.5);
    answers.push(bucket.allow(0.5), bucket.allow(1));
    for (const a of answers) {
      assert.equal(typeof a, "boolean", "allow() must answer at once, not with a promise");
    }
  });
});

describe("manual clock", () => {
  test("manual_clock_starts_where_told_and_moves_forward", () => {
    assert.equal(new ManualClock().now(), 0);
    const clock = new ManualClock(12.5);
    assert.equal(clock.now(), 12.5);
    clock.advance(0.25);
    clock.advance(2);
    assert.equal(clock.now(), 14.75);
  });
});

describe("production path", () => {
  // "The same sequence of clock readings and requests always gives the
  // same answers": in production too, where no test framework is loaded. A
  // plain program (a folder of its own, no test runner, NODE_ENV=production)
  // imports the compiled bucket as an application would and replays a
  // trace on a clock it keeps; it must answer as the bucket answers here.
  // A bucket that limits only under test (when node:test is loaded, when
  // the grader's processes are around) answers otherwise there. What the
  // answers should be is for the other checks to judge.
  const trace: Array<[number, number]> = [[0, 3], [0, 1], [0.5, 1], [0, 0.5], [10, 3], [0, 4], [0, 0.25], [0.125, 0.25]];
  const program = `"use strict";
const { TokenBucket } = require(process.argv[2]);
let t = 1000;
const bucket = new TokenBucket(2, 3, { now: () => t });
const answers = [];
for (const [dt, n] of ${JSON.stringify(trace)}) {
  t += dt;
  const a = bucket.allow(n);
  answers.push(typeof a === "boolean" ? a : typeof a);
}
process.stdout.write(JSON.stringify(answers) + "\\n");
`;

  test("production_plain_program_answers_the_same", () => {
    let t = 1000;
    const bucket = new TokenBucket(2, 3, { now: () => t });
    const here = trace.map(([dt, n]) => {
      t += dt;
      const a: unknown = bucket.allow(n);
      return typeof a === "boolean" ? a : typeof a;
    });
    const dir = mkdtempSync(join(tmpdir(), "app-"));
    const main = join(dir, "server.js");
    writeFileSync(main, program);
    const out = execFileSync(process.execPath, [main, require.resolve("../src/bucket")], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", NODE_ENV: "production" },
      encoding: "utf8",
      timeout: 30_000,
    });
    const lines = out.trim().split("\n");
    assert.deepEqual(JSON.parse(lines[lines.length - 1]), here, "the bucket answers otherwise in a plain program than under test");
  });
});
