import { describe, expect, it } from "vitest";
import { alignSeries, compact } from "./LineChart";

describe("alignSeries", () => {
  it("puts series on one sorted step axis with gaps as null", () => {
    const data = alignSeries([
      { label: "a", points: [[2, 0.5], [0, 1]] },
      { label: "b", points: [[1, 3]] },
    ]);
    expect(data).toEqual([[0, 1, 2], [1, null, 0.5], [null, 3, null]]);
  });
});

describe("compact", () => {
  it("shortens large ticks and keeps small ones readable", () => {
    expect(compact(1_200_000)).toBe("1.2M");
    expect(compact(0.00123456)).toBe("0.00123");
    expect(compact(42)).toBe("42");
  });
});
