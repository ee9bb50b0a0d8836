/** Starting points of the New job form per algorithm, beside the schema's own defaults. */

export interface Preset {
  name: string;
  description: string;
  /** Merged over the schema's defaults (nested objects field by field). */
  config: Record<string, unknown>;
}

/** A short run of each shipped algorithm: a minute or less on a laptop's CPU. */
const QUICK: Record<string, Record<string, unknown>> = {
  ddp: { steps: 30, log_interval: 5, eval_interval: 0 },
  hier_sync: { steps: 30, log_interval: 5 },
  mpc_mixed: { epochs: 1, max_steps: 20, log_every: 5 },
  param_server: { steps: 30, batch_size: 256, eval_samples: 2000, data: { vocab: 1000 } },
  split_nn: { steps: 30, eval_every: 0, report_every: 5 },
  zo_pair: { steps: 60, eval_every: 0, log_every: 10 },
};

export function presetsFor(algorithm: string): Preset[] {
  const out: Preset[] = [{ name: "Defaults", description: "the algorithm's defaults", config: {} }];
  if (QUICK[algorithm]) out.push({ name: "Quick demo", description: "a short run to see it work", config: QUICK[algorithm] });
  return out;
}

/**
 * Processes a role's first party starts with, where one is not enough: zo_pair's processors
 * work in pairs, so a single party runs two.
 */
const STARTING_PROCESSES: Record<string, Record<string, number>> = {
  zo_pair: { processor: 2 },
};

export function startingProcesses(algorithm: string, role: string): number {
  return STARTING_PROCESSES[algorithm]?.[role] ?? 1;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** `over` on top of `base`, nested objects merged key by key. */
export function merged(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    out[k] = isPlainObject(v) && isPlainObject(base[k]) ? merged(base[k], v) : structuredClone(v);
  }
  return out;
}
