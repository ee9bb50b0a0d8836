/**
 * Polling that slows down while the server fails: a query's `refetchInterval` doubles with each
 * failed poll in a row, up to a cap, and returns to its own pace after the first success.
 */

import { nominalDelay, withJitter } from "./backoff";

/** The longest wait between two polls of a failing query. */
export const POLL_CAP_MS = 30_000;
/** The share of a backed-off wait taken off, differently for each query, so polls spread out. */
const POLL_JITTER = 0.2;

/** The parts of a react-query `Query` that the backoff reads. */
export interface PolledQuery {
  queryHash: string;
  state: { status: "pending" | "error" | "success"; dataUpdatedAt: number; errorUpdateCount: number };
}

// errorUpdateCount when the query was last seen succeed, and which success that was
const marks = new WeakMap<object, { dataUpdatedAt: number; errorsBefore: number }>();

/** How many of a query's fetches have failed since its last success. */
export function failuresInARow(query: PolledQuery): number {
  const s = query.state;
  // never had data: every error so far is part of the run
  if (s.dataUpdatedAt === 0) return s.status === "error" ? s.errorUpdateCount : 0;
  if (s.status !== "error") {
    marks.set(query, { dataUpdatedAt: s.dataUpdatedAt, errorsBefore: s.errorUpdateCount });
    return 0;
  }
  let mark = marks.get(query);
  if (!mark || mark.dataUpdatedAt !== s.dataUpdatedAt) {
    // a success this function did not see: count from the error that follows it
    mark = { dataUpdatedAt: s.dataUpdatedAt, errorsBefore: s.errorUpdateCount - 1 };
    marks.set(query, mark);
  }
  return Math.max(1, s.errorUpdateCount - mark.errorsBefore);
}

/**
 * The wait before the next poll: `everyMs` while the query succeeds; after `failures` failures in
 * a row 2×, 4×, … `everyMs` up to the cap, less a part that is fixed for the query and the count
 * (react-query compares the interval on every render, so it must not change between two renders).
 */
export function pollDelay(everyMs: number, failures: number, key = "", capMs = POLL_CAP_MS): number {
  if (failures <= 0) return everyMs;
  const nominal = nominalDelay(failures + 1, { baseMs: everyMs, capMs: Math.max(capMs, everyMs), factor: 2 });
  return Math.max(everyMs, withJitter(nominal, POLL_JITTER, unitHash(`${key}#${failures}`)));
}

/** A `refetchInterval` that polls every `everyMs` and backs off while the polls fail. */
export function pollEvery(everyMs: number | false) {
  return (query: PolledQuery): number | false =>
    everyMs === false ? false : pollDelay(everyMs, failuresInARow(query), query.queryHash);
}

/** A number in [0, 1) that depends only on `text`. */
function unitHash(text: string): number {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 16777619);
  }
  return (h >>> 0) / 2 ** 32;
}
