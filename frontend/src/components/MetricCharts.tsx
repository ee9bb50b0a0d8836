import { useMemo } from "react";
import type { Series as ApiSeries } from "../api/client";
import { LineChart, type Series } from "./LineChart";

/** Groups series into one chart per metric family: `bytes_sent.to.3` goes with `bytes_sent`. */
export function groupSeries(series: ApiSeries[], rankLabel: (rank: number) => string): Map<string, Series[]> {
  const charts = new Map<string, Series[]>();
  for (const s of series) {
    const family = s.name.split(".")[0];
    const label = `${s.name === family ? "" : `${s.name.slice(family.length + 1)} `}${rankLabel(s.rank)}`;
    const list = charts.get(family) ?? [];
    list.push({ label, points: s.points.map((p) => [p.step, p.value] as [number, number]) });
    charts.set(family, list);
  }
  return charts;
}

const ORDER = ["loss", "accuracy", "auc", "eval_loss", "throughput", "step_time_s", "bytes_sent", "bytes_received"];

export function MetricCharts({ series, rankLabel }: { series: ApiSeries[]; rankLabel: (rank: number) => string }) {
  const charts = useMemo(() => groupSeries(series, rankLabel), [series, rankLabel]);
  const names = [...charts.keys()].sort((a, b) => {
    const ia = ORDER.indexOf(a);
    const ib = ORDER.indexOf(b);
    return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || a.localeCompare(b);
  });
  if (names.length === 0) return <p className="muted">No metrics reported yet.</p>;
  return (
    <div className="charts">
      {names.map((name) => (
        <LineChart key={name} title={name} series={charts.get(name)!} />
      ))}
    </div>
  );
}
