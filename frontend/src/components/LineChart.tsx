import { useEffect, useRef, useSyncExternalStore } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

export interface Series {
  label: string;
  points: [number, number][];
}

/** uPlot draws on a canvas, which cannot resolve CSS variables: read the theme's colours. */
function themeColor(name: string, fallback: string): string {
  const value = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return value || fallback;
}

const PALETTE = ["#2563eb", "#db2777", "#16a34a", "#ea580c", "#7c3aed", "#0891b2", "#ca8a04", "#64748b", "#dc2626", "#0d9488", "#9333ea", "#65a30d"];

const COMPACT = new Intl.NumberFormat("en", { notation: "compact", maximumSignificantDigits: 3 });

/** Axis tick text that fits: 1.2M rather than 1,200,000; small values keep their digits. */
export function compact(value: number): string {
  return Math.abs(value) >= 1000 ? COMPACT.format(value) : String(Number(value.toPrecision(3)));
}

/** Aligns several (step, value) series on one x axis, as uPlot expects. */
export function alignSeries(series: Series[], positiveOnly = false): uPlot.AlignedData {
  const steps = new Set<number>();
  for (const s of series) for (const [x] of s.points) steps.add(x);
  const xs = [...steps].sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  const columns = series.map((s) => {
    const col: (number | null)[] = new Array(xs.length).fill(null);
    // a log scale has no place for zero or below
    for (const [x, y] of s.points) col[index.get(x)!] = positiveOnly && y <= 0 ? null : y;
    return col;
  });
  return [xs, ...columns] as uPlot.AlignedData;
}

interface Props {
  title: string;
  series: Series[];
  height?: number;
  yLabel?: string;
  xLabel?: string;
  /** Tick and legend text of a value (default: `compact`). */
  format?: (value: number) => string;
  logScale?: boolean;
}

/** A line chart for long runs: uPlot draws hundreds of thousands of points smoothly. */
export function LineChart({ title, series, height = 220, yLabel, xLabel = "step", format = compact, logScale = false }: Props) {
  const theme = useThemeName();
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const labels = series.map((s) => s.label).join("\u0000");

  useEffect(() => {
    if (!host.current) return;
    const muted = themeColor("--muted", "#475569");
    const grid = themeColor("--grid", "#e2e8f0");
    const opts: uPlot.Options = {
      title,
      width: host.current.clientWidth || 480,
      height,
      scales: { x: { time: false }, y: logScale ? { distr: 3 } : {} },
      axes: [
        { label: xLabel, stroke: muted, grid: { stroke: grid }, ticks: { stroke: grid } },
        {
          label: yLabel,
          stroke: muted,
          grid: { stroke: grid },
          ticks: { stroke: grid },
          size: 56,
          values: (_u, ticks) => ticks.map(format),
        },
      ],
      series: [
        { label: xLabel },
        ...series.map((s, i) => ({
          label: s.label,
          stroke: PALETTE[i % PALETTE.length],
          width: 1.5,
          spanGaps: true,
          // a series of a point or two has no line to speak of: its points are drawn
          points: { show: s.points.length <= 2 || undefined, size: 7 },
          value: (_u: uPlot, v: number | null) => (v == null ? "—" : format(v)),
        })),
      ],
    };
    const u = new uPlot(opts, alignSeries(series, logScale), host.current);
    plot.current = u;
    const resize = new ResizeObserver(() => {
      if (host.current) u.setSize({ width: host.current.clientWidth, height });
    });
    resize.observe(host.current);
    return () => {
      resize.disconnect();
      u.destroy();
      plot.current = null;
    };
    // rebuilt only when the set of series changes; data updates go through setData below
  }, [title, height, labels, yLabel, xLabel, theme, logScale, format]);

  useEffect(() => {
    plot.current?.setData(alignSeries(series, logScale));
  }, [series, logScale]);

  const total = series.reduce((n, s) => n + s.points.length, 0);
  return (
    <figure className="chart" aria-label={`${title} chart`} data-points={total}>
      <div ref={host} />
      {total === 0 && <figcaption className="muted">No points yet.</figcaption>}
    </figure>
  );
}

function subscribeTheme(onChange: () => void): () => void {
  const observer = new MutationObserver(onChange);
  observer.observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
  return () => observer.disconnect();
}

/** Re-renders charts when the theme switches, so their canvas colours follow. */
function useThemeName(): string {
  return useSyncExternalStore(subscribeTheme, () => document.documentElement.dataset.theme ?? "light");
}
