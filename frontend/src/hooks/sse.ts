/** A Server-Sent Events reader over fetch, so the bearer token travels in a header. */

export interface SseEvent {
  id: string | null;
  event: string;
  data: string;
}

/** Splits an SSE byte stream into events; keeps partial input between chunks. */
export class SseParser {
  private buffer = "";
  private id: string | null = null;
  private event = "message";
  private data: string[] = [];

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
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "data") this.data.push(value);
      else if (field === "event") this.event = value;
      else if (field === "id") this.id = value;
    }
    return out;
  }

  get lastEventId(): string | null {
    return this.id;
  }
}

export interface StreamOptions {
  url: string;
  token: string | null;
  onEvent: (event: SseEvent) => void;
  signal: AbortSignal;
  retryMs?: number;
}

/** Follows an event stream until aborted, reconnecting with Last-Event-ID after a drop. */
export async function followEvents(opts: StreamOptions): Promise<void> {
  let lastId: string | null = null;
  while (!opts.signal.aborted) {
    const parser = new SseParser();
    try {
      const headers: Record<string, string> = { Accept: "text/event-stream" };
      if (opts.token) headers.Authorization = `Bearer ${opts.token}`;
      if (lastId) headers["Last-Event-ID"] = lastId;
      const res = await fetch(opts.url, { headers, signal: opts.signal });
      if (!res.ok || !res.body) throw new Error(`event stream: HTTP ${res.status}`);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        for (const ev of parser.feed(value)) {
          if (ev.id) lastId = ev.id;
          opts.onEvent(ev);
          if (ev.event === "end") return;
        }
      }
    } catch (err) {
      if (opts.signal.aborted) return;
      console.warn(err);
    }
    await new Promise((r) => setTimeout(r, opts.retryMs ?? 2000));
  }
}
