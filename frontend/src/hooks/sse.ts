/** A Server-Sent Events reader over fetch, so the bearer token travels in a header. */

import { Backoff, type BackoffOptions } from "./backoff";

export interface SseEvent {
  id: string | null;
  event: string;
  data: string;
}

/** Splits an SSE byte stream into events; keeps partial input between chunks. */
export class SseParser {
  private buffer = "";
  private id: string | null;
  private event = "message";
  private data: string[] = [];
  /** The last `retry:` field (the server's reconnection time in ms), if any. */
  retry: number | null = null;
  /** Comment lines seen, e.g. the server's keep-alives. */
  comments = 0;

  /** `lastEventId`: the id a resumed stream starts from, carried by events that name none. */
  constructor(lastEventId: string | null = null) {
    this.id = lastEventId;
  }

  feed(chunk: string): SseEvent[] {
    this.buffer += chunk;
    const out: SseEvent[] = [];
    let nl: number;
    while ((nl = this.buffer.search(/\r\n|\n|\r/)) >= 0) {
      const line = this.buffer.slice(0, nl);
      const skip = this.buffer.startsWith("\r\n", nl) ? 2 : 1;
      this.buffer = this.buffer.slice(nl + skip);
      if (line === "") {
        if (this.data.length > 0) {
          out.push({ id: this.id, event: this.event, data: this.data.join("\n") });
        }
        this.event = "message";
        this.data = [];
        continue;
      }
      if (line.startsWith(":")) {
        this.comments += 1;
        continue;
      }
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "data") this.data.push(value);
      else if (field === "event") this.event = value;
      else if (field === "id" && !value.includes("\0")) this.id = value;
      else if (field === "retry" && /^\d+$/.test(value)) this.retry = Number(value);
    }
    return out;
  }

  get lastEventId(): string | null {
    return this.id;
  }
}

/**
 * Where a followed stream stands:
 * - `connecting`: the first request is under way;
 * - `open`: the server answered and the stream is being read;
 * - `reconnecting`: the stream dropped or could not be opened; the next try is at `retryAt`
 *   (while waiting) or under way (`retryAt` absent);
 * - `closed`: the stream ended (its `end` event) or the follower was stopped.
 */
export type StreamState = "connecting" | "open" | "reconnecting" | "closed";

export interface StreamStatus {
  state: StreamState;
  /** Failed tries in a row; 0 once a connection delivered something. */
  failures: number;
  /** While waiting to reconnect: the delay chosen and when (Date.now() time) the next try starts. */
  retryInMs?: number;
  retryAt?: number;
  /** Why the last try failed or the last connection dropped. */
  error?: string;
  /** What the next connection resumes from. */
  lastEventId: string | null;
}

export interface StreamOptions {
  url: string;
  /** The bearer token, or a function that gives the current one for each (re)connection. */
  token: string | null | (() => string | null);
  onEvent: (event: SseEvent) => void;
  signal: AbortSignal;
  /** The first reconnect delay until the server sends its own with `retry:` (default 1 s). */
  retryMs?: number;
  /** The longest reconnect delay (default 30 s). */
  maxRetryMs?: number;
  /** Resume from this event id on the first connection too. */
  lastEventId?: string | null;
  /**
   * Reconnect when nothing (not even a keep-alive) arrived for this long (default 45 s, three of
   * the server's 15 s keep-alives); 0 turns the check off.
   */
  idleTimeoutMs?: number;
  onStatus?: (status: StreamStatus) => void;
  /** Factor, jitter and the random source of the backoff (tests fix `random`). */
  backoff?: Partial<Pick<BackoffOptions, "factor" | "jitter" | "random">>;
}

/** A server's `retry:` hint below this is raised to it: a hint of 0 must not become a busy loop. */
export const MIN_RETRY_MS = 500;
const DEFAULT_IDLE_TIMEOUT_MS = 45_000;

/**
 * Follows an event stream until aborted or its `end` event, reconnecting after a drop or a failed
 * request. Every reconnection resumes after the last event received (`Last-Event-ID` and, for
 * numeric ids, `?after=`). Reconnects back off exponentially with jitter: from the base (the
 * server's `retry:` hint once it sent one) doubling up to the cap, and start from the base again
 * after a connection that delivered events or keep-alives.
 */
export async function followEvents(opts: StreamOptions): Promise<void> {
  const { signal } = opts;
  const capMs = opts.maxRetryMs ?? 30_000;
  const backoff = new Backoff({ ...opts.backoff, baseMs: Math.min(opts.retryMs ?? 1000, capMs), capMs });
  const idleMs = opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  let lastId: string | null = opts.lastEventId ?? null;
  const report = (status: Omit<StreamStatus, "lastEventId">) => opts.onStatus?.({ ...status, lastEventId: lastId });

  let state: StreamState = "connecting";
  while (!signal.aborted) {
    report({ state, failures: backoff.failures });
    const parser = new SseParser(lastId);
    const conn = new AbortController();
    const stop = () => conn.abort(signal.reason);
    signal.addEventListener("abort", stop, { once: true });
    let idle: ReturnType<typeof setTimeout> | undefined;
    const armIdle = () => {
      if (idle !== undefined) clearTimeout(idle);
      if (idleMs > 0) idle = setTimeout(() => conn.abort(new Error(`no data for ${idleMs / 1000} s`)), idleMs);
    };
    let delivered = false;
    let serverDelayMs = 0;
    let error: string | undefined;
    try {
      const token = typeof opts.token === "function" ? opts.token() : opts.token;
      const headers: Record<string, string> = { Accept: "text/event-stream" };
      if (token) headers.Authorization = `Bearer ${token}`;
      if (lastId) headers["Last-Event-ID"] = lastId;
      armIdle();
      const res = await fetch(resumeUrl(opts.url, lastId), { headers, signal: conn.signal, cache: "no-store" });
      if (!res.ok || !res.body) {
        serverDelayMs = retryAfterMs(res.headers.get("Retry-After"));
        throw new Error(`event stream: HTTP ${res.status}`);
      }
      report({ state: "open", failures: backoff.failures });
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        armIdle();
        const comments = parser.comments;
        const events = parser.feed(value);
        if (parser.retry !== null) backoff.setBase(Math.max(MIN_RETRY_MS, parser.retry));
        if (events.length > 0 || parser.comments > comments) delivered = true;
        for (const ev of events) {
          if (ev.id !== null) lastId = ev.id === "" ? null : ev.id;
          opts.onEvent(ev);
          if (ev.event === "end") {
            report({ state: "closed", failures: 0 });
            return;
          }
        }
      }
      error = "the server closed the stream";
    } catch (err) {
      if (signal.aborted) break;
      error = conn.signal.aborted && conn.signal.reason instanceof Error ? conn.signal.reason.message : errorMessage(err);
    } finally {
      if (idle !== undefined) clearTimeout(idle);
      signal.removeEventListener("abort", stop);
      // frees the connection when the loop leaves it (an `end` event, an idle stream)
      conn.abort();
    }
    if (delivered) backoff.reset();
    const delay = Math.max(backoff.next(), Math.min(serverDelayMs, capMs));
    state = "reconnecting";
    report({ state, failures: backoff.failures, retryInMs: delay, retryAt: Date.now() + delay, error });
    await sleep(delay, signal);
  }
  report({ state: "closed", failures: backoff.failures });
}

/** `url` with `after=<id>` for a numeric event id, for servers or proxies that drop the header. */
export function resumeUrl(url: string, lastId: string | null): string {
  if (!lastId || !/^\d+$/.test(lastId)) return url;
  const absolute = /^[a-z][a-z\d+.-]*:/i.test(url) || url.startsWith("//");
  const u = new URL(url, typeof window === "undefined" ? "http://localhost/" : window.location.href);
  u.searchParams.set("after", lastId);
  return absolute ? u.toString() : `${u.pathname}${u.search}${u.hash}`;
}

/** A Retry-After header's delay in ms (seconds or an HTTP date); 0 when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number {
  if (!header) return 0;
  if (/^\s*\d+\s*$/.test(header)) return Number(header) * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? 0 : Math.max(0, at - now);
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
