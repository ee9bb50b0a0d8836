import { describe, expect, it } from "vitest";
import { SseParser } from "./sse";

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
  });

  it("accepts CRLF line endings", () => {
    const p = new SseParser();
    expect(p.feed("event: metric\r\ndata: 1\r\n\r\n")).toEqual([
      { id: null, event: "metric", data: "1" },
    ]);
  });
});
