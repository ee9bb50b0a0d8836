import type { Series as ApiSeries } from "../api/client";

/** What a metric's values are, for axes and tooltips. */
export type Unit = "bytes" | "ms" | "fraction" | "percent" | "count" | "rate" | "plain";

export function unitOf(name: string): Unit {
  if (/bytes/.test(name)) return "bytes";
  if (/(^|_)s$|_time_s$|_seconds$/.test(name) || name === "cpu_seconds") return "ms";
  if (name === "cpu_percent") return "percent";
  if (/accuracy|auc|progress|utilization|fraction/.test(name)) return "fraction";
  if (/rounds|count|generations/.test(name)) return "count";
  if (name === "throughput") return "rate";
  return "plain";
}

/** Counters that only grow over a run: shown as a rate per step unless asked for cumulative. */
export function isCumulative(name: string): boolean {
  return /^(bytes_sent|bytes_received|link_bytes_sent|online_bytes|offline_bytes|online_rounds)(\.|$)/.test(name) || name === "cpu_seconds";
}

const SYSTEM = /^(cpu_|memory_|gpu_)/;

/** A chart per family: `bytes_sent.to.3` and `bytes_sent.group.x` go with `bytes_sent`. */
export function familyOf(name: string): string {
  return name.split(".")[0];
}

/** Which part of a family a series is: its total, one peer, one group, or another breakdown. */
export function variantOf(name: string): string {
  const rest = name.split(".").slice(1);
  if (rest.length === 0) return "total";
  if (rest[0] === "to") return "per peer";
  if (rest[0] === "group") return "per group";
  return rest[0];
}

export function isSystem(family: string): boolean {
  return SYSTEM.test(family);
}

const ORDER = ["loss", "eval_loss", "accuracy", "auc", "throughput", "step_time_s", "bytes_sent", "bytes_received"];

export function familyOrder(a: string, b: string): number {
  const sa = isSystem(a) ? 1 : 0;
  const sb = isSystem(b) ? 1 : 0;
  const ia = ORDER.indexOf(a);
  const ib = ORDER.indexOf(b);
  return sa - sb || (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || a.localeCompare(b);
}

export function groupFamilies(series: ApiSeries[]): Map<string, ApiSeries[]> {
  const out = new Map<string, ApiSeries[]>();
  for (const s of series) {
    const f = familyOf(s.name);
    out.set(f, [...(out.get(f) ?? []), s]);
  }
  return new Map([...out.entries()].sort(([a], [b]) => familyOrder(a, b)));
}

export type Points = [number, number][];

/** The increase per step between consecutive points of a cumulative counter (a reset restarts it). */
export function toRate(points: Points): Points {
  const out: Points = [];
  for (let i = 1; i < points.length; i++) {
    const [x0, y0] = points[i - 1];
    const [x1, y1] = points[i];
    if (x1 <= x0) continue;
    out.push([x1, Math.max(0, y1 - (y1 < y0 ? 0 : y0)) / (x1 - x0)]);
  }
  return out;
}

/** Exponential moving average with weight `alpha` on the past (0: unchanged), debiased at the start. */
export function smooth(points: Points, alpha: number): Points {
  if (alpha <= 0) return points;
  let avg = 0;
  let weight = 0;
  return points.map(([x, y]) => {
    avg = alpha * avg + (1 - alpha) * y;
    weight = alpha * weight + (1 - alpha);
    return [x, avg / weight];
  });
}

const BYTE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

export function formatValue(value: number, unit: Unit): string {
  if (!Number.isFinite(value)) return "—";
  switch (unit) {
    case "bytes": {
      let v = Math.abs(value);
      let i = 0;
      while (v >= 1024 && i < BYTE_UNITS.length - 1) {
        v /= 1024;
        i++;
      }
      return `${value < 0 ? "-" : ""}${i === 0 ? Math.round(v) : v.toPrecision(3)} ${BYTE_UNITS[i]}`;
    }
    case "ms":
      return `${Number((value * 1000).toPrecision(3))} ms`;
    case "fraction":
      return `${Number((value * 100).toPrecision(3))}%`;
    case "percent":
      return `${Number(value.toPrecision(3))}%`;
    default:
      return Math.abs(value) >= 1000
        ? new Intl.NumberFormat("en", { notation: "compact", maximumSignificantDigits: 3 }).format(value)
        : String(Number(value.toPrecision(3)));
  }
}

/** The axis title of a family as shown: its unit, per step (or second) for a rate. */
export function axisLabel(unit: Unit, rate: boolean, axis: "step" | "time" = "step"): string {
  const base = { bytes: "bytes", ms: "ms", fraction: "%", percent: "% of a core", count: "count", rate: "samples/s", plain: "" }[unit];
  return rate ? `${base || "value"} per ${axis === "time" ? "s" : "step"}` : base;
}

/** Bytes each party sent each other party: the last value of every `bytes_sent.to.<rank>`. */
export function byteMatrix(series: ApiSeries[], partyOf: (rank: number) => string | undefined): { parties: string[]; bytes: Map<string, number> } {
  const bytes = new Map<string, number>();
  const parties = new Set<string>();
  for (const s of series) {
    const m = /^bytes_sent\.to\.(\d+)$/.exec(s.name);
    if (!m || !s.points.length) continue;
    const from = partyOf(s.rank) ?? `rank ${s.rank}`;
    const to = partyOf(Number(m[1])) ?? `rank ${m[1]}`;
    parties.add(from);
    parties.add(to);
    const key = `${from}\u0000${to}`;
    bytes.set(key, (bytes.get(key) ?? 0) + s.points[s.points.length - 1].value);
  }
  return { parties: [...parties].sort(), bytes };
}

const FORMATTERS = new Map<Unit, (value: number) => string>();

/** One formatter per unit, the same function each time (a chart is rebuilt when it changes). */
export function formatterOf(unit: Unit): (value: number) => string {
  let f = FORMATTERS.get(unit);
  if (!f) {
    f = (value: number) => formatValue(value, unit);
    FORMATTERS.set(unit, f);
  }
  return f;
}

/**
 * A step's wall-clock time, in seconds since the first step known: interpolated between the known
 * steps (`[step, epoch ms]`, sorted), held at the ends.
 */
export function stepClock(known: [number, number][]): (step: number) => number | null {
  if (known.length === 0) return () => null;
  const t0 = known[0][1];
  return (step) => {
    let lo = 0;
    let hi = known.length - 1;
    if (step <= known[lo][0]) return (known[lo][1] - t0) / 1000;
    if (step >= known[hi][0]) return (known[hi][1] - t0) / 1000;
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      if (known[mid][0] <= step) lo = mid;
      else hi = mid;
    }
    const [s0, a] = known[lo];
    const [s1, b] = known[hi];
    return (a + ((b - a) * (step - s0)) / (s1 - s0) - t0) / 1000;
  };
}

/** Points on the wall-clock axis: each step at its time (points at one time keep the last). */
export function onClock(points: Points, clock: (step: number) => number | null): Points {
  const out: Points = [];
  for (const [x, y] of points) {
    const t = clock(x);
    if (t === null) continue;
    if (out.length && out[out.length - 1][0] === t) out[out.length - 1] = [t, y];
    else out.push([t, y]);
  }
  return out;
}
