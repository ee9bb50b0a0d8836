import type { JobDigest, JobPublic } from "../api/client";

/** A configuration flattened to dotted paths: `{data: {vocab: 5}}` → `data.vocab: 5`. */
export function flatten(value: unknown, prefix = "", out = new Map<string, string>()): Map<string, string> {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 0 && prefix) out.set(prefix, "{}");
    for (const [k, v] of entries) flatten(v, prefix ? `${prefix}.${k}` : k, out);
  } else {
    out.set(prefix, JSON.stringify(value));
  }
  return out;
}

export interface DiffRow {
  path: string;
  values: (string | undefined)[];
}

/** The settings that differ between jobs: the algorithm, device, roles, and each differing configuration path. */
export function configDiff(jobs: JobPublic[]): DiffRow[] {
  const flat = jobs.map((j) => {
    const m = flatten(j.config, "config");
    m.set("algorithm", j.algorithm);
    m.set("device", j.device ?? "auto");
    const byRole = new Map<string, string[]>();
    for (const a of j.assignments) byRole.set(a.role, [...(byRole.get(a.role) ?? []), `${a.party} ×${a.processes}`]);
    for (const [role, parties] of byRole) m.set(`roles.${role}`, parties.join(", "));
    return m;
  });
  const paths = [...new Set(flat.flatMap((m) => [...m.keys()]))].sort((a, b) => rankPath(a) - rankPath(b) || a.localeCompare(b));
  return paths.map((path) => ({ path, values: flat.map((m) => m.get(path)) })).filter((r) => new Set(r.values).size > 1);
}

function rankPath(p: string): number {
  return p === "algorithm" ? 0 : p === "device" ? 1 : p.startsWith("roles.") ? 2 : 3;
}

/** Every metric name any of the jobs reported (without breakdowns), sorted. */
export function metricNames(digests: (JobDigest | undefined)[]): string[] {
  return [...new Set(digests.flatMap((d) => Object.keys(d?.metrics ?? {})))].filter((n) => n !== "progress").sort();
}

/** A job as a person tells it from another with the same name: its name, creation date and short id. */
export function jobTitle(j: { name: string; id: string; created_at: string }): string {
  return `${j.name} · ${new Date(j.created_at).toLocaleDateString()} · ${j.id.slice(0, 8)}`;
}
