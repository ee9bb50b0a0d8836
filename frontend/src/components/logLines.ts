import type { JobPublic, Schemas } from "../api/client";

export type Line = Schemas["LogLinePublic"];

export const LEVELS = ["debug", "info", "warning", "error", "critical"] as const;

/** Who a task is: its party, the role of each of its ranks, and its attempt. */
export interface TaskName {
  party: string;
  roles: Map<number, string>;
  attempt: number;
}

export function taskNames(job: JobPublic): Map<string, TaskName> {
  const names = new Map<string, TaskName>();
  for (const a of job.attempts)
    for (const t of a.tasks) {
      const roles = new Map(t.ranks.filter((r) => r.role).map((r) => [r.rank, r.role as string]));
      names.set(t.id, { party: t.party, roles, attempt: a.number });
    }
  return names;
}

/** A line's author as a person reads it: `bob · feature`, with the attempt when there were several. */
export function taskLabel(name: TaskName | undefined, id: string, rank: number, attempts: number): string {
  if (!name) return id.slice(0, 8);
  const role = name.roles.get(rank);
  const who = role ? `${name.party} · ${role}` : name.party;
  return attempts > 1 ? `${who} (attempt ${name.attempt})` : who;
}

export interface LogFilter {
  party: string;
  rank: string;
  minLevel: string;
  search: string;
}

export const NO_FILTER: LogFilter = { party: "", rank: "", minLevel: "debug", search: "" };

export function levelRank(level: string): number {
  const i = LEVELS.indexOf(level as (typeof LEVELS)[number]);
  return i < 0 ? 1 : i;
}

/** The lines a filter keeps: of one party, one rank, at or above a level, containing a text. */
export function filterLines(lines: Line[], filter: LogFilter, names: Map<string, TaskName>): Line[] {
  const needle = filter.search.trim().toLowerCase();
  const least = levelRank(filter.minLevel);
  return lines.filter(
    (l) =>
      (!filter.party || names.get(l.task_id)?.party === filter.party) &&
      (filter.rank === "" || l.rank === Number(filter.rank)) &&
      levelRank(l.level) >= least &&
      (!needle || l.message.toLowerCase().includes(needle)),
  );
}

/** One line of the downloaded log: time, party and role, rank, level, message. */
export function lineText(l: Line, names: Map<string, TaskName>, attempts: number): string {
  return `${l.time} ${taskLabel(names.get(l.task_id), l.task_id, l.rank, attempts)} r${l.rank} ${l.level.toUpperCase()} ${l.message}`;
}
