import { useState } from "react";
import { errorText, getToken, type Schemas } from "../api/client";
import { saveBlob } from "../api/save";
import type { Identity } from "../auth";
import { formatBytes } from "../hooks/queries";

type Checkpoint = Schemas["CheckpointPublic"];

/** Rows shown at first, and added by each "Show more". */
const PAGE = 10;

export interface CheckpointGroup {
  attempt: number;
  kind: Checkpoint["kind"];
  step: number;
  ranks: Checkpoint[];
}

const KIND_ORDER: Record<Checkpoint["kind"], number> = { model: 0, export: 1, checkpoint: 2 };
const KIND_LABEL: Record<Checkpoint["kind"], string> = { model: "Revealed model", export: "Table export", checkpoint: "Checkpoint" };

/** One row per (attempt, kind, step): results of a run first, then checkpoints newest first; ranks in rank order. */
export function groupCheckpoints(checkpoints: Checkpoint[]): CheckpointGroup[] {
  const groups = new Map<string, CheckpointGroup>();
  for (const c of checkpoints) {
    const key = `${c.attempt}/${c.kind}/${c.step}`;
    const group = groups.get(key) ?? { attempt: c.attempt, kind: c.kind, step: c.step, ranks: [] };
    // a step saved twice (a resumed attempt wrote it again) keeps the last record of each rank
    group.ranks = [...group.ranks.filter((r) => r.rank !== c.rank), c].sort((a, b) => a.rank - b.rank);
    groups.set(key, group);
  }
  return [...groups.values()].sort((a, b) => b.attempt - a.attempt || KIND_ORDER[a.kind] - KIND_ORDER[b.kind] || b.step - a.step);
}

/** Steps that every one of `ranks` saved (in any attempt), newest first: what a retry can resume from. */
export function completeSteps(checkpoints: Checkpoint[], ranks: number[]): number[] {
  const saved = new Map<number, Set<number>>();
  for (const c of checkpoints) if (c.kind === "checkpoint") saved.set(c.step, (saved.get(c.step) ?? new Set()).add(c.rank));
  return [...saved.entries()]
    .filter(([, by]) => ranks.length > 0 && ranks.every((r) => by.has(r)))
    .map(([step]) => step)
    .sort((a, b) => b - a);
}

/** Whether this viewer may download a rank's file: it was shared, and it is theirs (or the admin's). */
export function canDownload(c: Checkpoint, identity: Identity | null): boolean {
  return c.shared && !!identity && (identity.isAdmin || identity.name === c.party);
}

async function download(jobId: string, c: Checkpoint): Promise<void> {
  const kind = c.kind === "checkpoint" ? "" : `?kind=${c.kind}`;
  const path = `/api/v1/jobs/${jobId}/checkpoints/${c.attempt}/${c.step}/${c.rank}/file${kind}`;
  const response = await fetch(path, { headers: { Authorization: `Bearer ${getToken() ?? ""}` } });
  if (!response.ok) {
    const body = await response.json().catch(() => null);
    throw new Error(body?.detail ?? `${response.status} ${response.statusText}`);
  }
  saveBlob(await response.blob(), `${jobId.slice(0, 8)}-attempt${c.attempt}-${c.kind}-step${c.step}-rank${c.rank}.pt`);
}

/**
 * A job's artifacts: revealed models and table exports, then checkpoints grouped by step; each
 * rank's file downloads for its own party where its worker shared it.
 */
export function Checkpoints({ jobId, checkpoints, identity }: { jobId: string; checkpoints: Checkpoint[]; identity: Identity | null }) {
  const [error, setError] = useState<string | null>(null);
  const [shown, setShown] = useState(PAGE);
  const all = groupCheckpoints(checkpoints);
  if (!all.length) return <p className="muted">None yet.</p>;
  const groups = all.slice(0, shown);
  return (
    <>
      {error && <p className="banner bad">Could not download the checkpoint: {error}</p>}
      <table>
        <thead>
          <tr>
            <th>Attempt</th>
            <th>What</th>
            <th>Step</th>
            <th>Ranks</th>
          </tr>
        </thead>
        <tbody>
          {groups.map((g) => (
            <tr key={`${g.attempt}/${g.kind}/${g.step}`} data-kind={g.kind}>
              <td>{g.attempt}</td>
              <td>{KIND_LABEL[g.kind]}</td>
              <td>{g.kind === "model" ? "end" : g.step}</td>
              <td>
                <ul style={{ listStyle: "none", margin: 0, padding: 0 }}>
                  {g.ranks.map((c) => (
                    <li key={c.rank}>
                      <span className="mono">r{c.rank}</span> {c.party} · {formatBytes(c.size)} ·{" "}
                      <span className="mono" title={c.sha256}>
                        {c.sha256.slice(0, 12)}
                      </span>{" "}
                      {canDownload(c, identity) ? (
                        <button
                          aria-label={`Download ${g.kind} step ${g.step} rank ${c.rank}`}
                          onClick={() => {
                            setError(null);
                            download(jobId, c).catch((err) => setError(errorText(err)));
                          }}
                        >
                          Download
                        </button>
                      ) : (
                        <span className="muted" title={c.shared ? "only its party downloads it" : "kept on its party's host"}>
                          {c.shared ? "its party's" : "on its host"}
                        </span>
                      )}
                    </li>
                  ))}
                </ul>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {all.length > shown && (
        <button onClick={() => setShown(shown + PAGE)}>
          Show {Math.min(PAGE, all.length - shown)} more of {all.length - shown}
        </button>
      )}
    </>
  );
}
