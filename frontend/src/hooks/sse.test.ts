import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { followEvents, resumeUrl, retryAfterMs, SseParser, type StreamStatus } from "./sse";

describe("SseParser", () => {
  it("assembles events split across chunks", () => {
    const p = new SseParser();
    expect(p.feed("id: 7\nevent: sta")).toEqual([]);
    const events = p.feed('tus\ndata: {"a":1}\n\n: keep-alive\n\ndata: x\ndata: y\n\n');
    expect(events).toEqual([
      { id: "7", event: "status", data: '{"a":1}' },
      { id: "7", event: "message", data: "x\ny" },
    ]);
    expect(p.lastEventId).toBe("7");
    expect(p.comments).toBe(1);
  });

  it("accepts CRLF line endings", () => {
    const p = new SseParser();
    expect(p.feed("event: metric\r\ndata: 1\r\n\r\n")).toEqual([
      { id: null, event: "metric", data: "1" },
    ]);
  });

  it("reads the server's retry hint and ignores one that is not a number", () => {
    const p = new SseParser();
    p.feed("retry: 2000\n\n");
    expect(p.retry).toBe(2000);
    p.feed("retry: soon\n\n");
    expect(p.retry).toBe(2000);
  });

  it("carries the id a resumed stream starts from", () => {
    const p = new SseParser("41");
    expect(p.feed("event: status\ndata: {}\n\n")).toEqual([{ id: "41", event: "status", data: "{}" }]);
  });
});

describe("resumeUrl and retryAfterMs", () => {
  it("adds after= for a numeric id only", () => {
    expect(resumeUrl("/api/v1/jobs/j1/events", null)).toBe("/api/v1/jobs/j1/events");
    expect(resumeUrl("/api/v1/jobs/j1/events", "12")).toBe("/api/v1/jobs/j1/events?after=12");
    expect(resumeUrl("/e?after=3&x=1", "12")).toBe("/e?after=12&x=1");
    expect(resumeUrl("http://h:1/e", "5")).toBe("http://h:1/e?after=5");
    expect(resumeUrl("/e", "abc")).toBe("/e");
  });

  it("reads seconds and dates", () => {
    expect(retryAfterMs(null)).toBe(0);
    expect(retryAfterMs("7")).toBe(7000);
    expect(retryAfterMs(new Date(60_000).toUTCString(), 0)).toBe(60_000);
    expect(retryAfterMs("later")).toBe(0);
  });
});

// ---- followEvents against a fake fetch, on fake time ----

interface Call {
  at: number;
  url: string;
  lastEventId: string | null;
  authorization: string | null;
}

type Reply =
  | { kind: "down" }
  | { kind: "status"; status: number; headers?: Record<string, string> }
  | { kind: "stream"; chunks: string[]; hold?: boolean };

const down: Reply = { kind: "down" };
const stream = (chunks: string[], hold = false): Reply => ({ kind: "stream", chunks, hold });

/** A fetch that answers from a script (the last reply repeats) and records each request. */
function fakeServer(script: Reply[]) {
  const calls: Call[] = [];
  const fetch = vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
    const headers = new Headers(init?.headers);
    calls.push({
      at: Date.now(),
      url: String(input),
      lastEventId: headers.get("Last-Event-ID"),
      authorization: headers.get("Authorization"),
    });
    const reply = script[Math.min(calls.length - 1, script.length - 1)];
    if (reply.kind === "down") throw new TypeError("Failed to fetch");
    if (reply.kind === "status") return new Response("{}", { status: reply.status, headers: reply.headers });
    const signal = init?.signal;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        const enc = new TextEncoder();
        for (const c of reply.chunks) controller.enqueue(enc.encode(c));
        if (!reply.hold) controller.close();
        // a held stream stays open until the client gives it up
        else signal?.addEventListener("abort", () => controller.error(signal.reason));
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  });
  vi.stubGlobal("fetch", fetch);
  return calls;
}

const gaps = (calls: Call[]) => calls.slice(1).map((c, i) => c.at - calls[i].at);

function follow(extra: Partial<Parameters<typeof followEvents>[0]> = {}) {
  const abort = new AbortController();
  const events: string[] = [];
  const statuses: StreamStatus[] = [];
  let finished = false;
  const done = followEvents({
    url: "/api/v1/jobs/j1/events",
    token: "tok",
    signal: abort.signal,
    onEvent: (ev) => events.push(`${ev.id}:${ev.event}`),
    onStatus: (s) => statuses.push(s),
    // no jitter: the delays are the nominal ones
    backoff: { random: () => 0 },
    ...extra,
  }).then(() => {
    finished = true;
  });
  return { abort, events, statuses, done, finished: () => finished };
}

describe("followEvents", () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 0 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("backs off exponentially, capped at 30 s, while the server is down", async () => {
    const calls = fakeServer([down]);
    const f = follow();
    await vi.advanceTimersByTimeAsync(200_000);
    expect(gaps(calls).slice(0, 9)).toEqual([1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000, 30_000]);
    // the indicator is told how long each wait is and why
    const waits = f.statuses.filter((s) => s.state === "reconnecting" && s.retryInMs !== undefined);
    expect(waits.slice(0, 6).map((s) => s.retryInMs)).toEqual([1000, 2000, 4000, 8000, 16_000, 30_000]);
    expect(waits[0].error).toBe("Failed to fetch");
    expect(f.statuses[0].state).toBe("connecting");
    f.abort.abort();
    await f.done;
  });

  it("keeps the jittered delays between half the nominal one and the nominal one", async () => {
    const calls = fakeServer([down]);
    let i = 0;
    const randoms = [0.9, 0.1, 0.5, 0.99, 0.3, 0.7, 0.2, 0.6];
    const f = follow({ backoff: { random: () => randoms[i++ % randoms.length] } });
    await vi.advanceTimersByTimeAsync(250_000);
    const nominal = [1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000];
    gaps(calls)
      .slice(0, nominal.length)
      .forEach((gap, k) => {
        expect(gap).toBeLessThanOrEqual(nominal[k]);
        expect(gap).toBeGreaterThanOrEqual(nominal[k] / 2);
      });
    f.abort.abort();
    await f.done;
  });

  it("resumes from the last event id and starts from the server's base again after a connection that delivered", async () => {
    const calls = fakeServer([
      down,
      down,
      down,
      stream(["retry: 2000\n\n", "id: 5\nevent: status\ndata: {}\n\n", "id: 6\nevent: met", "rics\ndata: {}\n\n"]),
      down,
      down,
      stream(["retry: 2000\n\n", "id: 7\nevent: end\ndata: {}\n\n"]),
    ]);
    const f = follow();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(f.finished()).toBe(true);
    expect(f.events).toEqual(["5:status", "6:metrics", "7:end"]);
    // down: 1, 2, 4 s; the stream delivered and dropped: back to the base, now the server's 2 s; then 4 s
    expect(gaps(calls)).toEqual([1000, 2000, 4000, 2000, 4000, 8000]);
    expect(calls.map((c) => c.lastEventId)).toEqual([null, null, null, null, "6", "6", "6"]);
    expect(calls[0].url).toBe("/api/v1/jobs/j1/events");
    expect(calls.slice(4).map((c) => c.url)).toEqual(Array(3).fill("/api/v1/jobs/j1/events?after=6"));
    expect(calls.every((c) => c.authorization === "Bearer tok")).toBe(true);
    expect(f.statuses.at(-1)?.state).toBe("closed");
  });

  it("counts a connection that delivered nothing as a failure, and keeps a tiny or huge hint in bounds", async () => {
    const calls = fakeServer([stream(["retry: 0\n\n"]), stream(["retry: 0\n\n"]), stream(["retry: 900000\n\n"])]);
    const f = follow();
    await vi.advanceTimersByTimeAsync(40_000);
    // a hint of 0 is raised to 500 ms and still doubles; a hint above the cap is the cap
    expect(gaps(calls).slice(0, 3)).toEqual([500, 1000, 30_000]);
    f.abort.abort();
    await f.done;
  });

  it("resumes with the id given for the first connection too", async () => {
    const calls = fakeServer([stream(["id: 9\nevent: end\ndata: {}\n\n"])]);
    const f = follow({ lastEventId: "8" });
    await vi.advanceTimersByTimeAsync(0);
    await f.done;
    expect(calls[0]).toMatchObject({ lastEventId: "8", url: "/api/v1/jobs/j1/events?after=8" });
  });

  it("waits at least what Retry-After asks", async () => {
    const calls = fakeServer([{ kind: "status", status: 503, headers: { "Retry-After": "10" } }, down]);
    const f = follow();
    await vi.advanceTimersByTimeAsync(20_000);
    expect(gaps(calls).slice(0, 2)).toEqual([10_000, 2000]);
    expect(f.statuses.find((s) => s.retryInMs)?.error).toBe("event stream: HTTP 503");
    f.abort.abort();
    await f.done;
  });

  it("gives up a stream that went silent and resumes it", async () => {
    const calls = fakeServer([stream(["retry: 2000\n\n", "id: 3\nevent: status\ndata: {}\n\n"], true)]);
    const f = follow({ idleTimeoutMs: 45_000 });
    await vi.advanceTimersByTimeAsync(44_000);
    expect(calls).toHaveLength(1);
    expect(f.statuses.at(-1)?.state).toBe("open");
    await vi.advanceTimersByTimeAsync(1000);
    const wait = f.statuses.at(-1)!;
    expect(wait).toMatchObject({ state: "reconnecting", retryInMs: 2000, failures: 1, lastEventId: "3" });
    expect(wait.error).toMatch(/no data/);
    await vi.advanceTimersByTimeAsync(2000);
    expect(calls).toHaveLength(2);
    expect(calls[1].lastEventId).toBe("3");
    f.abort.abort();
    await f.done;
  });

  it("stops at once when aborted while waiting", async () => {
    const calls = fakeServer([down]);
    const f = follow();
    await vi.advanceTimersByTimeAsync(3500);
    expect(calls).toHaveLength(3);
    f.abort.abort();
    await vi.advanceTimersByTimeAsync(0);
    expect(f.finished()).toBe(true);
    expect(f.statuses.at(-1)?.state).toBe("closed");
    await vi.advanceTimersByTimeAsync(120_000);
    expect(calls).toHaveLength(3);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("reads the token again for each connection", async () => {
    const calls = fakeServer([down, stream(["event: end\ndata: {}\n\n"])]);
    let token = "old";
    const f = follow({ token: () => token });
    await vi.advanceTimersByTimeAsync(0);
    token = "new";
    await vi.advanceTimersByTimeAsync(1000);
    await f.done;
    expect(calls.map((c) => c.authorization)).toEqual(["Bearer old", "Bearer new"]);
  });
});
