import type { AlgorithmPublic, PartyPublic, WorkerPublic } from "../api/client";
import { formatBytes } from "../hooks/queries";

export interface AssignmentDraft {
  party: string;
  role: string;
  processes: number;
  dataset: string;
  options: string;
}

interface Props {
  algorithm: AlgorithmPublic;
  parties: PartyPublic[];
  workers: WorkerPublic[];
  value: AssignmentDraft[];
  onChange: (value: AssignmentDraft[]) => void;
  errors: Record<string, string>;
}

/** The minimum rows each role needs, so a fresh form starts valid-shaped. */
export function initialAssignments(algorithm: AlgorithmPublic, parties: PartyPublic[]): AssignmentDraft[] {
  const out: AssignmentDraft[] = [];
  let next = 0;
  for (const role of algorithm.roles) {
    for (let i = 0; i < Math.max(role.min, 0); i++) {
      out.push({ party: parties[next % Math.max(parties.length, 1)]?.name ?? "", role: role.name, processes: 1, dataset: "", options: "" });
      next++;
    }
  }
  return out;
}

export function hardwareSummary(workers: WorkerPublic[]): string {
  const online = workers.filter((w) => w.online);
  if (online.length === 0) return "no worker online";
  const gpus = online.flatMap((w) => w.accelerators);
  const cpus = online.reduce((n, w) => n + w.cpu_count, 0);
  const gpuText = gpus.length ? `, ${gpus.length} GPU (${formatBytes(gpus.reduce((n, g) => n + g.free_memory, 0))} free)` : "";
  return `${online.length} worker${online.length > 1 ? "s" : ""} online, ${cpus} CPU${gpuText}`;
}

export function RoleAssignments({ algorithm, parties, workers, value, onChange, errors }: Props) {
  const update = (index: number, patch: Partial<AssignmentDraft>) =>
    onChange(value.map((a, i) => (i === index ? { ...a, ...patch } : a)));
  const remove = (index: number) => onChange(value.filter((_, i) => i !== index));
  const add = (role: string) => onChange([...value, { party: parties[0]?.name ?? "", role, processes: 1, dataset: "", options: "" }]);

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
              const rowError = Object.entries(errors).find(([k]) => k === String(i) || k.startsWith(`${i}.`));
              return (
                <div key={i} className="row" style={{ marginBottom: "0.6rem" }}>
                  <label>
                    Party{" "}
                    <select aria-label={`${role.name} party ${rows.findIndex((r) => r.i === i) + 1}`} value={a.party} onChange={(e) => update(i, { party: e.target.value })}>
                      {parties.map((p) => (
                        <option key={p.name} value={p.name}>
                          {p.display_name || p.name}
                        </option>
                      ))}
                    </select>
                  </label>
                  <label>
                    Processes{" "}
                    <input type="number" min={1} max={64} style={{ width: "5em" }} value={a.processes} onChange={(e) => update(i, { processes: Number(e.target.value) })} />
                  </label>
                  <label>
                    Dataset{" "}
                    <input type="text" placeholder="e.g. sklearn:digits" value={a.dataset} onChange={(e) => update(i, { dataset: e.target.value })} />
                  </label>
                  <label>
                    Options (JSON){" "}
                    <input type="text" className="mono" placeholder="{}" value={a.options} onChange={(e) => update(i, { options: e.target.value })} />
                  </label>
                  <span className="muted" data-testid={`${prefix}-hardware`}>
                    {hardwareSummary(partyWorkers)}
                  </span>
                  <button type="button" onClick={() => remove(i)} disabled={rows.length <= role.min} aria-label={`Remove ${role.name} assignment`}>
                    Remove
                  </button>
                  {rowError && (
                    <small className="error" role="alert">
                      {rowError[1]}
                    </small>
                  )}
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
      options,
    };
  });
}
