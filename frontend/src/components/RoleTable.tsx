/** Who plays what in a job: party → role → ranks → worker, with each rank's device and backend. */
import type { JobPublic, WorkerPublic } from "../api/client";
import { ErrorText } from "./ErrorText";
import { StatusChip } from "./StatusChip";

type Task = JobPublic["attempts"][number]["tasks"][number];

export interface RoleRow {
  party: string;
  role: string;
  ranks: number[];
  worker: string;
  devices: string[];
  backend: string;
  task?: Task;
}

/** One row per party and role: from the running attempt's tasks, or from the assignments before. */
export function roleRows(job: JobPublic, workers: WorkerPublic[] = []): RoleRow[] {
  const attempt = job.attempts[job.attempts.length - 1];
  const hostOf = (id: string) => workers.find((w) => w.id === id)?.hostname ?? id.slice(0, 8);
  if (attempt?.tasks.length) {
    const rows: RoleRow[] = [];
    for (const t of attempt.tasks) {
      const roles = [...new Set(t.ranks.map((r) => r.role ?? "—"))];
      for (const role of roles) {
        const ranks = t.ranks.filter((r) => (r.role ?? "—") === role);
        rows.push({
          party: t.party,
          role,
          ranks: ranks.map((r) => r.rank),
          worker: hostOf(t.worker_id),
          devices: [...new Set(ranks.map((r) => r.device))],
          backend: ranks[0]?.backend ?? "gloo",
          task: t,
        });
      }
    }
    return rows;
  }
  return job.assignments.map((a) => ({ party: a.party, role: a.role, ranks: [], worker: `${a.processes} process${a.processes > 1 ? "es" : ""}, not placed yet`, devices: [], backend: "" }));
}

function rankText(ranks: number[]): string {
  if (ranks.length === 0) return "—";
  const sorted = [...ranks].sort((a, b) => a - b);
  const contiguous = sorted.every((r, i) => i === 0 || r === sorted[i - 1] + 1);
  return contiguous && sorted.length > 2 ? `${sorted[0]}–${sorted[sorted.length - 1]}` : sorted.join(", ");
}

export function RoleTable({ job, workers, bytesOf }: { job: JobPublic; workers?: WorkerPublic[]; bytesOf?: (ranks: number[]) => string }) {
  const rows = roleRows(job, workers);
  return (
    <table aria-label="Roles">
      <thead>
        <tr>
          <th>Party</th>
          <th>Role</th>
          <th>Ranks</th>
          <th>Worker</th>
          <th>Device</th>
          <th>Backend</th>
          <th>Status</th>
          {bytesOf && <th>Bytes sent</th>}
          <th>Reason</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((r, i) => (
          <tr key={i} data-party={r.party} data-role={r.role}>
            <td>{r.party}</td>
            <td className="mono">{r.role}</td>
            <td className="mono">{rankText(r.ranks)}</td>
            <td>{r.worker}</td>
            <td className="mono">{r.devices.join(", ") || "—"}</td>
            <td className="mono" title="how the party's ranks talk among themselves; other parties are reached over TLS">
              {r.backend || "—"}
            </td>
            <td>{r.task ? <StatusChip status={r.task.status} /> : "—"}</td>
            {bytesOf && <td>{r.ranks.length ? bytesOf(r.ranks) : "—"}</td>}
            <td className="muted">
              <ErrorText text={r.task?.reason} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
