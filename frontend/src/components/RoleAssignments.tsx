import type { AlgorithmPublic, PartyName, WorkerPublic } from "../api/client";
import { formatBytes } from "../hooks/queries";
import { startingProcesses } from "./presets";

export interface AssignmentDraft {
  party: string;
  role: string;
  processes: number;
  dataset: string;
  options: string;
  capacity?: number[] | null;
}

interface Props {
  algorithm: AlgorithmPublic;
  parties: PartyName[];
  workers: WorkerPublic[];
  value: AssignmentDraft[];
  onChange: (value: AssignmentDraft[]) => void;
  errors: Record<string, string>;
  /** Whether the signed-in caller sees this party's workers (a party sees only its own). */
  seesWorkersOf?: (party: string) => boolean;
}

/**
 * The minimum rows each role needs, so a fresh form starts valid-shaped: parties with a worker
 * online first, taken in turn so that roles that must differ get different parties.
 */
export function initialAssignments(algorithm: AlgorithmPublic, parties: PartyName[], workers: WorkerPublic[] = []): AssignmentDraft[] {
  const online = new Set(workers.filter((w) => w.online).map((w) => w.party));
  const ordered = [...parties].sort((a, b) => Number(online.has(b.name)) - Number(online.has(a.name)));
  const out: AssignmentDraft[] = [];
  let next = 0;
  for (const role of algorithm.roles) {
    for (let i = 0; i < Math.max(role.min, 0); i++) {
      const party = ordered[next % Math.max(ordered.length, 1)]?.name ?? "";
      out.push(draft(algorithm, role.name, party));
      next++;
    }
  }
  return out;
}

function draft(algorithm: AlgorithmPublic, role: string, party: string): AssignmentDraft {
  return { party, role, processes: startingProcesses(algorithm.name, role), dataset: "", options: "" };
}

/** The form's rows for a job's assignments (to run it again with changes). */
export function draftsOf(assignments: { party: string; role: string; processes: number; dataset: string | null; capacity: number[] | null; options: Record<string, unknown> }[]): AssignmentDraft[] {
  return assignments.map((a) => ({
    party: a.party,
    role: a.role,
    processes: a.processes,
    dataset: a.dataset ?? "",
    options: Object.keys(a.options).length ? JSON.stringify(a.options) : "",
    capacity: a.capacity,
  }));
}

export function hardwareSummary(workers: WorkerPublic[]): string {
  const online = workers.filter((w) => w.online);
  if (online.length === 0) return "no worker online";
  const gpus = online.flatMap((w) => w.accelerators);
  const cpus = online.reduce((n, w) => n + w.cpu_count, 0);
  const gpuText = gpus.length ? `, ${gpus.length} GPU (${formatBytes(gpus.reduce((n, g) => n + g.free_memory, 0))} free)` : "";
  return `${online.length} worker${online.length > 1 ? "s" : ""} online, ${cpus} CPU${gpuText}`;
}

export function RoleAssignments({ algorithm, parties, workers, value, onChange, errors, seesWorkersOf = () => true }: Props) {
  const update = (index: number, patch: Partial<AssignmentDraft>) =>
    onChange(value.map((a, i) => (i === index ? { ...a, ...patch } : a)));
  const remove = (index: number) => onChange(value.filter((_, i) => i !== index));
  const add = (role: string) => onChange([...value, draft(algorithm, role, parties[0]?.name ?? "")]);
  const known = new Set(parties.map((p) => p.name));

  return (
    <div>
      {errors._ && (
        <p className="error" role="alert">
          {errors._}
        </p>
      )}
      {algorithm.roles.map((role) => {
        const rows = value.map((a, i) => ({ a, i })).filter(({ a }) => a.role === role.name);
        const max = role.max ?? Infinity;
        return (
          <fieldset key={role.name} className="panel">
            <legend>
              <strong>{role.name}</strong>{" "}
              <span className="muted">
                ({role.max === role.min ? `exactly ${role.min}` : role.max === null ? `at least ${role.min}` : `${role.min}–${role.max}`} parties)
              </span>
            </legend>
            {role.description && <p className="muted">{role.description}</p>}
            {rows.map(({ a, i }) => {
              const partyWorkers = workers.filter((w) => w.party === a.party);
              const prefix = `assignments.${i}`;
              const rowErrors = Object.entries(errors).filter(([k]) => k === String(i) || k.startsWith(`${i}.`));
              const bad = (field: string) => errors[`${i}.${field}`] !== undefined;
              return (
                <div key={i} className="row" style={{ marginBottom: "0.6rem" }}>
                  <label>
                    Party{" "}
                    <select aria-label={`${role.name} party ${rows.findIndex((r) => r.i === i) + 1}`} aria-invalid={bad("party")} value={a.party} onChange={(e) => update(i, { party: e.target.value })}>
                      {!known.has(a.party) && <option value={a.party}>{a.party}</option>}
                      {parties.map((p) => (
                        <option key={p.name} value={p.name}>
                          {p.display_name || p.name}
                        </option>
                      ))}
                    </select>
                  </label>
                  <label>
                    Processes{" "}
                    <input type="number" min={1} max={64} style={{ width: "5em" }} aria-invalid={bad("processes")} value={a.processes} onChange={(e) => update(i, { processes: Number(e.target.value) })} />
                  </label>
                  <label>
                    Dataset{" "}
                    <input type="text" placeholder="e.g. sklearn:digits" aria-invalid={bad("dataset")} value={a.dataset} onChange={(e) => update(i, { dataset: e.target.value })} />
                  </label>
                  <label>
                    Options (JSON){" "}
                    <input type="text" className="mono" placeholder="{}" aria-invalid={bad("options")} value={a.options} onChange={(e) => update(i, { options: e.target.value })} />
                  </label>
                  <span className="muted" data-testid={`${prefix}-hardware`}>
                    {seesWorkersOf(a.party) ? hardwareSummary(partyWorkers) : "its workers are not shown to you"}
                  </span>
                  <button type="button" onClick={() => remove(i)} disabled={rows.length <= role.min} aria-label={`Remove ${role.name} assignment`}>
                    Remove
                  </button>
                  {rowErrors.map(([k, msg]) => (
                    <small key={k} className="error" role="alert" data-path={`assignments.${k}`}>
                      {k.includes(".") ? `${k.split(".").slice(1).join(".")}: ` : ""}
                      {msg}
                    </small>
                  ))}
                </div>
              );
            })}
            <button type="button" onClick={() => add(role.name)} disabled={rows.length >= max}>
              Add {role.name} party
            </button>
          </fieldset>
        );
      })}
    </div>
  );
}

/** Turns drafts into the API's assignment objects; throws a message for bad options JSON. */
export function toAssignments(drafts: AssignmentDraft[]) {
  return drafts.map((d, i) => {
    let options: Record<string, unknown> = {};
    if (d.options.trim()) {
      try {
        options = JSON.parse(d.options);
      } catch {
        throw new Error(`assignment ${i + 1}: options must be a JSON object`);
      }
    }
    return {
      party: d.party,
      role: d.role,
      processes: d.processes,
      dataset: d.dataset.trim() || null,
      ...(d.capacity ? { capacity: d.capacity } : {}),
      options,
    };
  });
}
