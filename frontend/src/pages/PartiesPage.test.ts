import { describe, expect, it } from "vitest";
import { certificateText, SLUG_PATTERN } from "./PartiesPage";

describe("certificateText", () => {
  const now = new Date("2026-11-24T12:00:00Z");

  it("counts the days a worker's certificate has left", () => {
    expect(certificateText("2026-12-24T13:00:00Z", now)).toBe("valid 30 more days");
    expect(certificateText("2026-11-25T13:00:00Z", now)).toBe("valid 1 more day");
  });

  it("says when there is none or it has expired", () => {
    expect(certificateText(null, now)).toBe("none (registered without one)");
    expect(certificateText("2026-11-20T00:00:00Z", now)).toBe("expired: restart the worker");
  });
});

describe("SLUG_PATTERN", () => {
  it("compiles as a browser compiles a pattern attribute and follows the server's slug rule", () => {
    const re = new RegExp(`^(?:${SLUG_PATTERN})$`, "v");
    expect(["alice", "bank-2", "a"].every((s) => re.test(s))).toBe(true);
    expect(["Alice", "2bank", "-a", "a_b", "a".repeat(64)].some((s) => re.test(s))).toBe(false);
  });
});
