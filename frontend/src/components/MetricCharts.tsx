import { useMemo, useState } from "react";
import type { Series as ApiSeries } from "../api/client";
import { ByteMatrix } from "./ByteMatrix";
import { LineChart, type Series } from "./LineChart";
import { useQuery } from "@tanstack/react-query";
import { api, unwrap } from "../api/client";
import { axisLabel, formatterOf, formatValue, groupFamilies, isCumulative, isSystem, onClock, smooth, stepClock, toRate, unitOf, variantOf, type Unit } from "./metricFamilies";

export interface ChartOptions {
  party: string;
  rank: string;
  smoothing: number;
  logScale: boolean;
  cumulative: boolean;
  /** The x axis: the step, or seconds since the first step (rates become per second). */
  axis: "step" | "time";
}

export const DEFAULT_OPTIONS: ChartOptions = { party: "", rank: "", smoothing: 0, logScale: false, cumulative: false, axis: "step" };

export interface FamilyChart {
  family: string;
  axis: "step" | "time";
  unit: Unit;
  rate: boolean;
  variants: string[];
  variant: string;
  lines: Series[];
}

/**
 * The charts to draw: one per metric family, its series of the chosen party and rank and of one
 * breakdown (the total, per peer, per group), counters as a rate per step unless cumulative.
 */
export function familyCharts(
  series: ApiSeries[],
  options: ChartOptions,
  rankLabel: (rank: number) => string,
  partyOf: (rank: number) => string | undefined,
  chosen: Record<string, string> = {},
  clock?: (step: number) => number | null,
): FamilyChart[] {
  const onAxis = (points: [number, number][]) => (options.axis === "time" && clock ? onClock(points, clock) : points);
  const kept = series.filter((s) => (!options.party || partyOf(s.rank) === options.party) && (options.rank === "" || s.rank === Number(options.rank)));
  const charts: FamilyChart[] = [];
  for (const [family, members] of groupFamilies(kept)) {
    const variants = [...new Set(members.map((s) => variantOf(s.name)))].sort((a, b) => (a === "total" ? -1 : b === "total" ? 1 : a.localeCompare(b)));
    const variant = chosen[family] && variants.includes(chosen[family]) ? chosen[family] : variants[0];
    const picked = members
      .filter((s) => variantOf(s.name) === variant)
      .sort((a, b) => a.rank - b.rank || a.name.localeCompare(b.name, undefined, { numeric: true }))
      .map((s) => ({
        label: `${s.name.split(".").slice(variant === "total" ? 1 : 2).join(".")} ${rankLabel(s.rank)}`.trim(),
        raw: onAxis(s.points.map((p) => [p.step, p.value] as [number, number])),
      }));
    // a counter seen at one step only (a rank that reports no steps, a job stopped early) has no
    // rate: its values so far are shown instead
    const single = new Set(picked.flatMap((l) => l.raw.map(([x]) => x))).size === 1;
    const rate = isCumulative(family) && !options.cumulative && !single;
    const lines = picked.map((l) => ({ label: l.label, points: smooth(rate ? toRate(l.raw) : l.raw, options.smoothing) }));
    charts.push({ family, axis: options.axis, unit: unitOf(family), rate, variants, variant, lines });
  }
  return charts;
}

/** Whether a chart has nothing to draw a line through: every series at most one point at one step. */
export function singlePoint(chart: FamilyChart): boolean {
  const steps = new Set(chart.lines.flatMap((l) => l.points.map(([x]) => x)));
  return steps.size === 1;
}

export function MetricCharts({
  series,
  rankLabel,
  partyOf = () => undefined,
  jobId,
}: {
  series: ApiSeries[];
  rankLabel: (rank: number) => string;
  partyOf?: (rank: number) => string | undefined;
  /** Offers the wall-clock axis, from the job's step times. */
  jobId?: string;
}) {
  const [options, setOptions] = useState<ChartOptions>(DEFAULT_OPTIONS);
  const [chosen, setChosen] = useState<Record<string, string>>({});
  const lastStep = Math.max(0, ...series.map((s) => s.points[s.points.length - 1]?.step ?? 0));
  const times = useQuery({
    queryKey: ["step-times", jobId, lastStep],
    queryFn: async () => unwrap(await api.GET("/api/v1/jobs/{job_id}/step-times", { params: { path: { job_id: jobId! } } })),
    enabled: Boolean(jobId) && options.axis === "time",
  });
  const clock = useMemo(() => stepClock((times.data?.points ?? []).map((p) => [p.step, new Date(p.time).getTime()])), [times.data]);
  const axis = options.axis === "time" && times.data ? "time" : "step";
  const charts = useMemo(
    () => familyCharts(series, { ...options, axis }, rankLabel, partyOf, chosen, clock),
    [series, options, axis, rankLabel, partyOf, chosen, clock],
  );
  const ranks = useMemo(() => [...new Set(series.map((s) => s.rank))].filter((r) => !options.party || partyOf(r) === options.party).sort((a, b) => a - b), [series, options.party, partyOf]);
  const parties = useMemo(() => [...new Set(series.map((s) => partyOf(s.rank)).filter((p): p is string => Boolean(p)))].sort(), [series, partyOf]);
  const set = (patch: Partial<ChartOptions>) => setOptions((o) => ({ ...o, ...patch }));
  const hasCounters = charts.some((c) => isCumulative(c.family));

  if (series.length === 0) return <p className="muted">No metrics reported yet.</p>;
  const training = charts.filter((c) => !isSystem(c.family));
  const system = charts.filter((c) => isSystem(c.family));
  const draw = (c: FamilyChart) => (
    <div key={c.family} className="family" data-family={c.family}>
      {c.variants.length > 1 && (
        <label className="variant">
          Show{" "}
          <select aria-label={`${c.family} breakdown`} value={c.variant} onChange={(e) => setChosen((old) => ({ ...old, [c.family]: e.target.value }))}>
            {c.variants.map((v) => (
              <option key={v} value={v}>
                {v}
              </option>
            ))}
          </select>
        </label>
      )}
      {singlePoint(c) ? (
        <SingleValues chart={c} />
      ) : (
        <LineChart
          title={`${c.family}${c.variant === "total" ? "" : ` (${c.variant})`}${c.rate ? (axis === "time" ? " per second" : " per step") : ""}`}
          series={c.lines}
          yLabel={axisLabel(c.unit, c.rate, axis)}
          xLabel={axis === "time" ? "seconds since the first step" : "step"}
          format={formatterOf(c.unit)}
          logScale={options.logScale}
        />
      )}
    </div>
  );
  return (
    <>
      <div className="row chart-options" role="group" aria-label="Chart options">
        {parties.length > 1 && (
          <label>
            Party{" "}
            <select value={options.party} onChange={(e) => set({ party: e.target.value, rank: "" })}>
              <option value="">all</option>
              {parties.map((p) => (
                <option key={p}>{p}</option>
              ))}
            </select>
          </label>
        )}
        <label>
          Rank{" "}
          <select value={options.rank} onChange={(e) => set({ rank: e.target.value })}>
            <option value="">all</option>
            {ranks.map((r) => (
              <option key={r} value={r}>
                {rankLabel(r)}
              </option>
            ))}
          </select>
        </label>
        <label>
          Smoothing{" "}
          <input type="range" min={0} max={0.95} step={0.05} value={options.smoothing} onChange={(e) => set({ smoothing: Number(e.target.value) })} />
        </label>
        <label>
          <input type="checkbox" checked={options.logScale} onChange={(e) => set({ logScale: e.target.checked })} /> Log scale
        </label>
        {hasCounters && (
          <label>
            <input type="checkbox" checked={options.cumulative} onChange={(e) => set({ cumulative: e.target.checked })} /> Cumulative counters
          </label>
        )}
        {jobId && (
          <label>
            x axis{" "}
            <select value={options.axis} onChange={(e) => set({ axis: e.target.value as ChartOptions["axis"] })}>
              <option value="step">step</option>
              <option value="time">wall-clock time</option>
            </select>
          </label>
        )}
      </div>
      <div className="charts">{training.map(draw)}</div>
      {system.length > 0 && (
        <>
          <h3>System, per rank</h3>
          <div className="charts">{system.map(draw)}</div>
        </>
      )}
      <ByteMatrix series={series} partyOf={partyOf} />
    </>
  );
}

/** A family with one point per series (a final evaluation, say): its values, not a lone dot on an axis. */
function SingleValues({ chart }: { chart: FamilyChart }) {
  const step = chart.lines.find((l) => l.points.length)?.points[0][0];
  return (
    <figure className="chart single" aria-label={`${chart.family} chart`} data-points={chart.lines.length}>
      <figcaption>
        <strong>{chart.family}</strong> <span className="muted">at {chart.axis === "time" ? `${Number(step?.toPrecision(3))} s` : `step ${step}`}</span>
      </figcaption>
      <table>
        <tbody>
          {chart.lines.map((l) => (
            <tr key={l.label}>
              <td>{l.label}</td>
              <td className="num">{formatValue(l.points[l.points.length - 1]?.[1] ?? NaN, chart.unit)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </figure>
  );
}
