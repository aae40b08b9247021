export interface Clock {
  now(): number;
}

const requireFinite = (label: string, x: number, positive = false): void => {
  const ok = Number.isFinite(x) && (positive ? x > 0 : x >= 0);
  if (!ok) throw new RangeError(`${label}: expected a finite ${positive ? "positive" : "non-negative"} number, got ${x}`);
};

export class ManualClock implements Clock {
  #t: number;
  constructor(start: number = 0) {
    this.#t = start;
  }
  now(): number {
    return this.#t;
  }
  advance(seconds: number): void {
    requireFinite("seconds", seconds);
    this.#t += seconds;
  }
}

export class TokenBucket {
  #available: number;
  #lastRefill: number;

  constructor(
    readonly ratePerSec: number,
    readonly capacity: number,
    private readonly clock: Clock,
  ) {
    requireFinite("ratePerSec", ratePerSec);
    requireFinite("capacity", capacity, true);
    this.#available = capacity;
    this.#lastRefill = clock.now();
  }

  allow(n: number = 1): boolean {
    requireFinite("n", n);
    const t = this.clock.now();
    if (t > this.#lastRefill) {
      this.#available = Math.min(this.capacity, this.#available + (t - this.#lastRefill) * this.ratePerSec);
      this.#lastRefill = t;
    }
    const fits = n <= this.capacity && n <= this.#available;
    if (fits) this.#available -= n;
    return fits;
  }
}
