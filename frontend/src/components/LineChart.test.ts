import { describe, expect, it } from "vitest";
import { alignSeries, compact } from "./LineChart";
import { groupSeries } from "./MetricCharts";

describe("alignSeries", () => {
  it("puts series on one sorted step axis with gaps as null", () => {
    const data = alignSeries([
      { label: "a", points: [[2, 0.5], [0, 1]] },
      { label: "b", points: [[1, 3]] },
    ]);
    expect(data).toEqual([[0, 1, 2], [1, null, 0.5], [null, 3, null]]);
  });
});

describe("groupSeries", () => {
  it("groups a metric family into one chart with a series per rank", () => {
    const point = (step: number, value: number) => ({ step, value, min: value, max: value, count: 1 });
    const charts = groupSeries(
      [
        { name: "loss", rank: 0, downsampled: false, points: [point(0, 2)] },
        { name: "loss", rank: 1, downsampled: false, points: [point(0, 3)] },
        { name: "bytes_sent.to.1", rank: 0, downsampled: false, points: [point(0, 10)] },
      ],
      (r) => `r${r}`,
    );
    expect([...charts.keys()]).toEqual(["loss", "bytes_sent"]);
    expect(charts.get("loss")!.map((s) => s.label)).toEqual(["r0", "r1"]);
    expect(charts.get("bytes_sent")![0].label).toBe("to.1 r0");
  });
});

describe("compact", () => {
  it("shortens large ticks and keeps small ones readable", () => {
    expect(compact(1_200_000)).toBe("1.2M");
    expect(compact(0.00123456)).toBe("0.00123");
    expect(compact(42)).toBe("42");
  });
});
