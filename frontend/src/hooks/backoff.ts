/** Capped exponential backoff with jitter, for reconnects and polls against a server that is down. */

export interface BackoffOptions {
  /** The first delay; the server's `retry:` hint replaces it when one arrives. */
  baseMs: number;
  /** No delay is longer than this. */
  capMs: number;
  /** Each failure in a row multiplies the delay by this. */
  factor: number;
  /**
   * The share of each delay taken off at random, so that many clients do not come back at the
   * same moment: 0.5 gives a delay between half the nominal one and the nominal one.
   */
  jitter: number;
  /** A number in [0, 1); Math.random unless a test needs them fixed. */
  random: () => number;
}

export const DEFAULT_BACKOFF: BackoffOptions = {
  baseMs: 1000,
  capMs: 30_000,
  factor: 2,
  jitter: 0.5,
  random: Math.random,
};

/** The nominal delay (before jitter) after `failures` failures in a row (1 for the first). */
export function nominalDelay(failures: number, opts: Pick<BackoffOptions, "baseMs" | "capMs" | "factor">): number {
  const exponent = Math.max(0, failures - 1);
  // past the cap the power would only grow; stop it before it overflows to Infinity
  const nominal = opts.baseMs * Math.pow(opts.factor, Math.min(exponent, 64));
  return Math.min(opts.capMs, Math.max(0, nominal));
}

/** A nominal delay with part of it taken off at random (`random` in [0, 1)). */
export function withJitter(nominalMs: number, jitter: number, random: number): number {
  const share = Math.min(1, Math.max(0, jitter));
  return Math.round(nominalMs * (1 - share * random));
}

/**
 * Counts failures in a row and says how long to wait before the next try:
 * base, 2×base, 4×base, … up to the cap, each less a random part; `reset()` after a success.
 */
export class Backoff {
  private opts: BackoffOptions;
  private count = 0;

  constructor(opts: Partial<BackoffOptions> = {}) {
    this.opts = { ...DEFAULT_BACKOFF, ...opts };
  }

  /** Failures since the last success. */
  get failures(): number {
    return this.count;
  }

  get baseMs(): number {
    return this.opts.baseMs;
  }

  get capMs(): number {
    return this.opts.capMs;
  }

  /** Sets the first delay (e.g. from the server's `retry:` hint), kept within the cap. */
  setBase(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) return;
    this.opts = { ...this.opts, baseMs: Math.min(ms, this.opts.capMs) };
  }

  /** Records a failure and returns the delay to wait before the next try. */
  next(): number {
    this.count += 1;
    return withJitter(nominalDelay(this.count, this.opts), this.opts.jitter, this.opts.random());
  }

  /** After a success: the next failure waits the base delay again. */
  reset(): void {
    this.count = 0;
  }
}
