import { QueryClient, QueryObserver } from "@tanstack/react-query";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { failuresInARow, pollDelay, pollEvery, POLL_CAP_MS } from "./polling";

describe("pollDelay", () => {
  it("is the pace itself while polls succeed, then doubles up to the cap", () => {
    expect(pollDelay(3000, 0, "k")).toBe(3000);
    const nominal = [6000, 12_000, 24_000, 30_000, 30_000, 30_000];
    nominal.forEach((n, i) => {
      const d = pollDelay(3000, i + 1, "k");
      expect(d).toBeLessThanOrEqual(n);
      expect(d).toBeGreaterThanOrEqual(n * 0.8);
    });
    expect(pollDelay(3000, 1000, "k")).toBeLessThanOrEqual(POLL_CAP_MS);
  });

  it("gives the same delay for the same query and count, so re-renders do not restart the timer", () => {
    expect(pollDelay(5000, 3, '["jobs"]')).toBe(pollDelay(5000, 3, '["jobs"]'));
  });

  it("never polls faster than the pace asked for", () => {
    expect(pollDelay(60_000, 2, "k")).toBe(60_000);
  });
});

describe("failuresInARow", () => {
  const query = (status: "pending" | "error" | "success", dataUpdatedAt: number, errorUpdateCount: number) => ({
    queryHash: "q",
    state: { status, dataUpdatedAt, errorUpdateCount },
  });

  it("counts the errors since the last success", () => {
    const q = query("success", 100, 2);
    expect(failuresInARow(q)).toBe(0);
    q.state = { status: "error", dataUpdatedAt: 100, errorUpdateCount: 3 };
    expect(failuresInARow(q)).toBe(1);
    q.state = { status: "error", dataUpdatedAt: 100, errorUpdateCount: 5 };
    expect(failuresInARow(q)).toBe(3);
    q.state = { status: "success", dataUpdatedAt: 200, errorUpdateCount: 5 };
    expect(failuresInARow(q)).toBe(0);
  });

  it("counts every error of a query that never had data", () => {
    expect(failuresInARow(query("error", 0, 4))).toBe(4);
    expect(failuresInARow(query("pending", 0, 4))).toBe(0);
  });
});

describe("pollEvery with react-query", () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 0 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("slows down while the server is down and returns to its pace once it answers", async () => {
    const client = new QueryClient();
    let up = true;
    const times: number[] = [];
    const observer = new QueryObserver(client, {
      queryKey: ["polled"],
      queryFn: async () => {
        times.push(Date.now());
        if (!up) throw new TypeError("Failed to fetch");
        return Date.now();
      },
      refetchInterval: pollEvery(1000),
      refetchIntervalInBackground: true,
      retry: false,
    });
    const unsubscribe = observer.subscribe(() => {});
    await vi.advanceTimersByTimeAsync(3500);
    expect(times).toEqual([0, 1000, 2000, 3000]);

    up = false;
    times.length = 0;
    await vi.advanceTimersByTimeAsync(120_000);
    const gaps = times.slice(1).map((t, i) => t - times[i]);
    // 2, 4, 8, 16, 30, 30 … s, each less up to a fifth
    const nominal = [2000, 4000, 8000, 16_000, 30_000, 30_000];
    nominal.forEach((n, i) => {
      expect(gaps[i]).toBeLessThanOrEqual(n);
      expect(gaps[i]).toBeGreaterThanOrEqual(n * 0.8);
    });
    expect(times.length).toBeLessThan(12); // against 120 at the normal pace

    up = true;
    await vi.advanceTimersByTimeAsync(30_000);
    times.length = 0;
    await vi.advanceTimersByTimeAsync(3000);
    expect(times).toHaveLength(3);
    unsubscribe();
    client.clear();
  });
});
