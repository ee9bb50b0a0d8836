/** Algorithms and jobs shaped as the control plane serves them, for component tests. */
import type { AlgorithmPublic, JobPublic } from "./api/client";

const role = (name: string, min: number, max: number | null = null) => ({
  name,
  min,
  max,
  description: "",
  max_processes: null,
  devices: ["cpu" as const],
  gpu_benefit: false,
  device_note: "",
  sees_metrics: ["*"],
});

/** param_server's settings as its schema states them: options of one mode beside the mode. */
export const paramServer: AlgorithmPublic = {
  name: "param_server",
  title: "Parameter servers",
  description: "",
  metrics: ["loss", "auc"],
  one_device_type: false,
  roles: [role("server", 1), role("worker", 1)],
  config_schema: {
    type: "object",
    properties: {
      steps: { type: "integer", minimum: 1, default: 500, title: "Steps" },
      hidden: { type: "array", items: { type: "integer" }, maxItems: 16, title: "Hidden" },
      mode: { type: "string", enum: ["sync", "async"], default: "sync", title: "Mode" },
      staleness: { type: "integer", minimum: 1, maximum: 64, default: 1, title: "Staleness" },
      eviction: { type: "string", enum: ["none", "ttl", "lfu"], default: "none", title: "Eviction" },
      ttl_steps: { type: "integer", minimum: 1, default: 1000, title: "Ttl Steps" },
      max_rows: { type: "integer", minimum: 1, default: 1000000, title: "Max Rows" },
      data: { $ref: "#/$defs/ClickLogConfig", description: "The generated click log" },
    },
    $defs: {
      ClickLogConfig: {
        type: "object",
        title: "ClickLogConfig",
        properties: {
          num_fields: { type: "integer", minimum: 1, default: 3, title: "Num Fields" },
          vocab: { type: "integer", minimum: 2, default: 10000, title: "Vocab" },
        },
      },
    },
  },
};

export const zoPair: AlgorithmPublic = {
  name: "zo_pair",
  title: "Forward-only pair training",
  description: "",
  metrics: ["loss"],
  one_device_type: false,
  roles: [role("processor", 1)],
  config_schema: { type: "object", properties: { steps: { type: "integer", minimum: 1, default: 1000, title: "Steps" } } },
};

export const directory = {
  data: [
    { name: "alice", display_name: "Alice" },
    { name: "bob", display_name: "Bob" },
    { name: "carol", display_name: "Carol" },
  ],
  count: 3,
};

export function job(patch: Partial<JobPublic> = {}): JobPublic {
  return {
    id: "j1",
    name: "clicks",
    algorithm: "param_server",
    status: "failed",
    status_reason: "rank 1 failed",
    priority: 0,
    device: "cpu",
    created_at: "2026-11-24T08:00:00Z",
    started_at: "2026-11-24T08:00:05Z",
    finished_at: "2026-11-24T08:01:05Z",
    creator: "alice",
    parties: ["alice", "bob"],
    waiting_for: [],
    config: { steps: 40, hidden: [32], mode: "sync", staleness: 1, eviction: "none", ttl_steps: 1000, max_rows: 1000000, data: { num_fields: 3, vocab: 500 } },
    assignments: [
      { party: "bob", role: "server", processes: 1, dataset: null, capacity: null, options: {} },
      { party: "alice", role: "worker", processes: 2, dataset: "sklearn:digits", capacity: null, options: { threads: 2 } },
    ],
    approvals: [],
    attempts: [],
    ...patch,
  };
}
