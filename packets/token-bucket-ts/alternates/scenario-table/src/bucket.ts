/**
 * Token bucket with an injected clock. Tokens are fractional; refill is
 * proportional to elapsed time and capped at the bucket's capacity.
 */

export interface Clock {
  now(): number;
}

function assertAmount(what: string, value: number): void {
  if (typeof value !== "number" || Number.isNaN(value) || !Number.isFinite(value) || value < 0) {
    throw new RangeError(`${what} must be a finite number >= 0 (got ${String(value)})`);
  }
}

export class ManualClock implements Clock {
  private current: number;

  public constructor(start = 0) {
    this.current = start;
  }

  public now(): number {
    return this.current;
  }

  public advance(seconds: number): void {
    assertAmount("seconds", seconds);
    this.current = this.current + seconds;
  }
}

export class TokenBucket {
  private level: number;
  private updatedAt: number;

  public constructor(
    private readonly ratePerSec: number,
    private readonly capacity: number,
    private readonly clock: Clock,
  ) {
    assertAmount("ratePerSec", ratePerSec);
    assertAmount("capacity", capacity);
    if (capacity === 0) {
      throw new RangeError("capacity must be > 0");
    }
    this.level = capacity;
    this.updatedAt = clock.now();
  }

  public allow(n = 1): boolean {
    assertAmount("n", n);
    this.catchUp();
    if (n > this.capacity || n > this.level) {
      return false;
    }
    this.level = this.level - n;
    return true;
  }

  private catchUp(): void {
    const at = this.clock.now();
    if (at <= this.updatedAt) {
      return;
    }
    const gained = (at - this.updatedAt) * this.ratePerSec;
    this.level = Math.min(this.capacity, this.level + gained);
    this.updatedAt = at;
  }
}
