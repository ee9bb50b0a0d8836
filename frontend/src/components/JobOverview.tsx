/** A job at a glance: status, duration, attempts, creator, progress with time left, and each metric's final and best value. */
import type { JobPublic, Series } from "../api/client";
import { formatTime } from "../hooks/queries";
import { formatValue as formatInUnit, unitOf } from "./metricFamilies";
import { StatusChip } from "./StatusChip";

export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** From the start (or creation) to the end, or to now while it runs. */
export function durationOf(job: Pick<JobPublic, "started_at" | "finished_at">, now = Date.now()): number | null {
  if (!job.started_at) return null;
  const end = job.finished_at ? new Date(job.finished_at).getTime() : now;
  return end - new Date(job.started_at).getTime();
}

/** The fraction done: the slowest rank's last `progress` report, or null without one. */
export function progressOf(series: Series[]): number | null {
  const last = series.filter((s) => s.name === "progress" && s.points.length).map((s) => s.points[s.points.length - 1].value);
  return last.length ? Math.min(1, Math.max(0, Math.min(...last))) : null;
}

/** Time left at the pace so far: elapsed × (1 − p) / p. */
export function timeLeft(elapsedMs: number, progress: number): number | null {
  if (progress <= 0 || progress >= 1) return null;
  return (elapsedMs * (1 - progress)) / progress;
}

/** Whether a lower value is better (losses, errors, times), higher (accuracy, AUC, throughput), or neither (counters). */
export function better(name: string): "min" | "max" | null {
  if (/loss|error|perplexity|(^|_)time|_s$|_ms$|latency/.test(name)) return "min";
  if (/acc|auc|f1|precision|recall|throughput|score/.test(name)) return "max";
  return null;
}

export interface MetricSummary {
  name: string;
  final: number;
  best: number | null;
  bestStep: number | null;
  rank: number;
}

/**
 * Per metric, its final and best value, read from the lowest rank that reports it (ranks of one
 * role report the same quantity; the lowest is the one a user compares across runs).
 */
export function metricSummaries(series: Series[]): MetricSummary[] {
  const byName = new Map<string, Series>();
  for (const s of series) {
    if (!s.points.length || s.name === "progress") continue;
    const seen = byName.get(s.name);
    if (!seen || s.rank < seen.rank) byName.set(s.name, s);
  }
  return [...byName.values()]
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((s) => {
      const final = s.points[s.points.length - 1].value;
      const way = better(s.name);
      if (!way) return { name: s.name, final, best: null, bestStep: null, rank: s.rank };
      // a downsampled point is a bucket's mean: its extreme is the bucket's min or max
      const at = (p: Series["points"][number]) => (way === "min" ? p.min : p.max);
      const pick = s.points.reduce((b, p) => ((way === "min" ? at(p) < at(b) : at(p) > at(b)) ? p : b));
      return { name: s.name, final, best: at(pick), bestStep: pick.step, rank: s.rank };
    });
}

/** A metric's value in its unit where it has one (bytes, times, rates), else as a number. */
export function formatMetric(name: string, v: number): string {
  const unit = unitOf(name);
  return unit === "bytes" || unit === "ms" || unit === "percent" || unit === "rate" ? formatInUnit(v, unit) + (unit === "rate" ? "/s" : "") : formatValue(v);
}

export function formatValue(v: number): string {
  if (Number.isInteger(v)) return v.toLocaleString();
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(3);
  return v.toPrecision(4).replace(/\.?0+$/, "");
}

export function JobOverview({ job, series, now = Date.now() }: { job: JobPublic; series: Series[]; now?: number }) {
  const duration = durationOf(job, now);
  const progress = progressOf(series);
  const running = job.status === "running";
  const left = running && duration !== null && progress !== null ? timeLeft(duration, progress) : null;
  const summaries = metricSummaries(series);
  return (
    <section className="panel overview" aria-label="Overview">
      <dl className="facts">
        <div>
          <dt>Status</dt>
          <dd>
            <StatusChip status={job.status} />
          </dd>
        </div>
        <div>
          <dt>Duration</dt>
          <dd data-testid="duration">{duration === null ? "not started" : formatDuration(duration)}</dd>
        </div>
        <div>
          <dt>Attempts</dt>
          <dd>{job.attempts.length}</dd>
        </div>
        <div>
          <dt>Created</dt>
          <dd>
            {formatTime(job.created_at)} by {job.creator}
          </dd>
        </div>
        <div>
          <dt>Progress</dt>
          <dd data-testid="progress">
            {progress === null ? (
              "—"
            ) : (
              <>
                <progress value={progress} max={1} aria-label="Progress" /> {Math.round(progress * 100)} %
                {left !== null && <span className="muted"> · about {formatDuration(left)} left</span>}
              </>
            )}
          </dd>
        </div>
      </dl>
      {summaries.length > 0 && (
        <table aria-label="Final metrics" className="metrics-summary">
          <thead>
            <tr>
              <th>Metric</th>
              <th>Final</th>
              <th>Best</th>
            </tr>
          </thead>
          <tbody>
            {summaries.map((m) => (
              <tr key={m.name} data-metric={m.name}>
                <td className="mono">{m.name}</td>
                <td>{formatMetric(m.name, m.final)}</td>
                <td>{m.best === null ? "—" : `${formatMetric(m.name, m.best)} at step ${m.bestStep}`}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
