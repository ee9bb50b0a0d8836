import { describe, expect, it } from "vitest";
import type { Series } from "../api/client";
import { DEFAULT_OPTIONS, familyCharts, singlePoint } from "./MetricCharts";
import { byteMatrix, formatValue, onClock, smooth, stepClock, toRate, unitOf } from "./metricFamilies";

const pts = (pairs: [number, number][]) => pairs.map(([step, value]) => ({ step, value, min: value, max: value, count: 1 }));
const s = (name: string, rank: number, pairs: [number, number][]): Series => ({ name, rank, downsampled: false, points: pts(pairs) });
const PARTY: Record<number, string> = { 0: "alice", 1: "alice", 2: "bob", 3: "bob" };
const partyOf = (r: number) => PARTY[r];
const label = (r: number) => `r${r} ${PARTY[r]}`;

// hier_sync-like: totals, groups and peers of four ranks in one family
const HIER: Series[] = [0, 1, 2, 3].flatMap((r) => [
  s("bytes_sent", r, [[10, 100], [20, 300]]),
  s("bytes_sent.group.intra_node", r, [[10, 60], [20, 180]]),
  s("bytes_sent.group.inter_node", r, [[10, 40], [20, 120]]),
  ...[0, 1, 2, 3].filter((p) => p !== r).map((p) => s(`bytes_sent.to.${p}`, r, [[10, 10 * (p + 1)], [20, 30 * (p + 1)]])),
]);

describe("familyCharts", () => {
  it("shows a family's totals per rank as a rate, with the breakdowns one choice away", () => {
    const [bytes] = familyCharts(HIER, DEFAULT_OPTIONS, label, partyOf);
    expect(bytes.family).toBe("bytes_sent");
    expect(bytes.variants).toEqual(["total", "per group", "per peer"]);
    expect(bytes.lines.map((l) => l.label)).toEqual(["r0 alice", "r1 alice", "r2 bob", "r3 bob"]);
    expect(bytes.rate).toBe(true);
    expect(bytes.lines[0].points).toEqual([[20, 20]]); // (300 - 100) / 10 steps

    const cumulative = familyCharts(HIER, { ...DEFAULT_OPTIONS, cumulative: true, rank: "2" }, label, partyOf, { bytes_sent: "per group" })[0];
    expect(cumulative.lines.map((l) => l.label)).toEqual(["inter_node r2 bob", "intra_node r2 bob"]);
    expect(cumulative.lines[1].points).toEqual([[10, 60], [20, 180]]);

    const bob = familyCharts(HIER, { ...DEFAULT_OPTIONS, party: "bob" }, label, partyOf, { bytes_sent: "per peer" })[0];
    expect(bob.lines).toHaveLength(6);
    expect(bob.lines[0].label).toBe("0 r2 bob");
  });

  it("puts system metrics after training metrics and recognises a lone evaluation point", () => {
    const charts = familyCharts([s("memory_rss_bytes", 0, [[5, 1e8]]), s("accuracy", 0, [[80, 0.9]]), s("loss", 0, [[1, 2], [2, 1]])], DEFAULT_OPTIONS, label, partyOf);
    expect(charts.map((c) => c.family)).toEqual(["loss", "accuracy", "memory_rss_bytes"]);
    expect(singlePoint(charts[1])).toBe(true);
    expect(singlePoint(charts[0])).toBe(false);
    // a counter a rank reported at one step only: its value so far, not an empty rate
    const [dealer] = familyCharts([s("bytes_sent", 2, [[0, 10], [0, 5e7]])], DEFAULT_OPTIONS, label, partyOf);
    expect(dealer.rate).toBe(false);
    expect(singlePoint(dealer)).toBe(true);
  });
});

describe("units and transforms", () => {
  it("formats bytes, times in ms and fractions", () => {
    expect(unitOf("step_time_s")).toBe("ms");
    expect(formatValue(0.0123, "ms")).toBe("12.3 ms");
    expect(unitOf("bytes_sent.to.3")).toBe("bytes");
    expect(formatValue(50 * 1024 * 1024, "bytes")).toBe("50.0 MiB");
    expect(formatValue(0.915, "fraction")).toBe("91.5%");
    expect(unitOf("cpu_percent")).toBe("percent");
  });

  it("turns counters into rates (a reset restarts the count) and smooths", () => {
    expect(toRate([[0, 0], [10, 100], [20, 100], [30, 50]])).toEqual([[10, 10], [20, 0], [30, 5]]);
    expect(smooth([[0, 1], [1, 1]], 0.9)).toEqual([[0, 1], [1, 1]]);
    const s2 = smooth([[0, 0], [1, 10]], 0.5);
    expect(s2[1][1]).toBeCloseTo(10 * 0.5 / 0.75);
  });
});

describe("byteMatrix", () => {
  it("sums the last per-peer counters of each party's ranks to each other party", () => {
    const { parties, bytes } = byteMatrix(HIER, partyOf);
    expect(parties).toEqual(["alice", "bob"]);
    // alice's ranks 0 and 1 sent to rank 1 (60, from rank 0) and rank 0 (30, from rank 1)
    expect(bytes.get("alice\u0000alice")).toBe(90);
    expect(bytes.get("alice\u0000bob")).toBe(2 * (90 + 120));
  });
});

describe("the wall-clock axis", () => {
  it("places steps at their times, interpolated between known steps, so counters become rates per second", () => {
    const clock = stepClock([[0, 1_000_000], [10, 1_004_000], [20, 1_005_000]]);
    expect([0, 5, 10, 15, 20, 99].map(clock)).toEqual([0, 2, 4, 4.5, 5, 5]);
    expect(onClock([[10, 1], [20, 2], [30, 3]], clock)).toEqual([[4, 1], [5, 3]]);
    expect(stepClock([])(3)).toBeNull();

    const time = { ...DEFAULT_OPTIONS, axis: "time" as const, rank: "0" };
    const [bytes] = familyCharts(HIER, time, label, partyOf, {}, clock);
    expect(bytes.axis).toBe("time");
    expect(bytes.lines[0].points).toEqual([[5, 200]]); // 200 bytes more in the second from 4 s to 5 s
  });
});
