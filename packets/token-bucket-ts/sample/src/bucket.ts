// A token-bucket rate limiter that takes its time from an injected clock.
//
// Nothing here reads the system clock or waits: the caller hands in a
// Clock, and tests drive a ManualClock by hand.

/** Where the bucket gets the time from: seconds, any origin. */
export interface Clock {
  now(): number;
}

function checked(name: string, value: number, allowZero = true): number {
  if (!Number.isFinite(value) || value < 0 || (value === 0 && !allowZero)) {
    throw new RangeError(`${name} must be finite and ${allowZero ? ">= 0" : "> 0"}, got ${value}`);
  }
  return value;
}

/** A Clock that stands still until advance() is called. */
export class ManualClock implements Clock {
  private reading: number;

  constructor(start = 0) {
    if (!Number.isFinite(start)) {
      throw new RangeError(`start must be finite, got ${start}`);
    }
    this.reading = start;
  }

  now(): number {
    return this.reading;
  }

  advance(seconds: number): void {
    this.reading += checked("seconds", seconds);
  }
}

/** Admits work while tokens last; tokens come back at ratePerSec, up to capacity. */
export class TokenBucket {
  private readonly rate: number;
  private readonly capacity: number;
  private tokens: number;
  private stamp: number;

  constructor(ratePerSec: number, capacity: number, private readonly clock: Clock) {
    this.rate = checked("ratePerSec", ratePerSec);
    this.capacity = checked("capacity", capacity, false);
    this.tokens = this.capacity; // a new bucket starts full
    this.stamp = clock.now();
  }

  /** Takes n tokens and returns true, or returns false and takes nothing. */
  allow(n = 1): boolean {
    checked("n", n);
    this.refill();
    if (n > this.capacity) {
      return false; // can never fit: reject without touching the tokens
    }
    if (n <= this.tokens) {
      this.tokens -= n;
      return true;
    }
    return false;
  }

  private refill(): void {
    const now = this.clock.now();
    const elapsed = now - this.stamp;
    if (elapsed <= 0) {
      return; // a clock that stood still or went back adds nothing
    }
    this.tokens = Math.min(this.capacity, this.tokens + elapsed * this.rate);
    this.stamp = now;
  }
}
