import { describe, expect, it } from "vitest";
import { Backoff, nominalDelay, withJitter } from "./backoff";

describe("Backoff", () => {
  it("doubles from the base up to the cap", () => {
    const b = new Backoff({ baseMs: 1000, capMs: 30_000, random: () => 0 });
    const delays = Array.from({ length: 9 }, () => b.next());
    expect(delays).toEqual([1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000, 30_000]);
    expect(b.failures).toBe(9);
  });

  it("takes a random part off each delay, never going above the cap or below half", () => {
    for (const r of [0, 0.25, 0.5, 0.999]) {
      const b = new Backoff({ baseMs: 1000, capMs: 30_000, jitter: 0.5, random: () => r });
      for (let i = 1; i <= 12; i++) {
        const nominal = nominalDelay(i, { baseMs: 1000, capMs: 30_000, factor: 2 });
        const d = b.next();
        expect(d).toBeLessThanOrEqual(Math.min(nominal, 30_000));
        expect(d).toBeGreaterThanOrEqual(nominal / 2);
      }
    }
    expect(withJitter(8000, 0.5, 0.5)).toBe(6000);
  });

  it("starts from the base again after a success", () => {
    const b = new Backoff({ baseMs: 1000, random: () => 0 });
    b.next();
    b.next();
    expect(b.next()).toBe(4000);
    b.reset();
    expect(b.failures).toBe(0);
    expect(b.next()).toBe(1000);
    expect(b.next()).toBe(2000);
  });

  it("takes a new base (a server's hint) within the cap", () => {
    const b = new Backoff({ baseMs: 1000, capMs: 30_000, random: () => 0 });
    b.setBase(2000);
    expect([b.next(), b.next(), b.next()]).toEqual([2000, 4000, 8000]);
    b.setBase(120_000);
    b.reset();
    expect(b.next()).toBe(30_000);
  });

  it("stays at the cap after very many failures", () => {
    expect(nominalDelay(10_000, { baseMs: 1000, capMs: 30_000, factor: 2 })).toBe(30_000);
  });
});
