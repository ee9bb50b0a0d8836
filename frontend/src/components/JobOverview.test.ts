import { describe, expect, it } from "vitest";
import { job } from "../test-fixtures";
import { causeOf } from "./ErrorText";
import { better, formatDuration, formatMetric, progressOf, timeLeft } from "./JobOverview";
import { roleRows } from "./RoleTable";

const pts = (values: number[]) => values.map((value, i) => ({ step: i + 1, value, min: value, max: value, count: 1 }));

describe("job overview figures", () => {
  it("estimates the time left from the slowest rank's progress", () => {
    const series = [
      { name: "progress", rank: 0, downsampled: false, points: pts([0.2, 0.5]) },
      { name: "progress", rank: 1, downsampled: false, points: pts([0.25]) },
    ];
    expect(progressOf(series)).toBe(0.25);
    expect(timeLeft(60_000, 0.25)).toBe(180_000);
    expect(timeLeft(60_000, 1)).toBeNull();
    expect(formatDuration(180_000)).toBe("3 min 0 s");
  });

  it("shows a metric in its unit where it has one", () => {
    expect(formatMetric("bytes_sent", 3 * 1024 * 1024)).toBe("3.00 MiB");
    expect(formatMetric("step_time_s", 0.0123)).toBe("12.3 ms");
    expect(formatMetric("loss", 0.123456)).toBe("0.1235");
  });

  it("knows which way a metric improves, and that counters have no best", () => {
    expect(better("eval_loss")).toBe("min");
    expect(better("step_time_s")).toBe("min");
    expect(better("accuracy")).toBe("max");
    expect(better("bytes_sent")).toBeNull();
  });

  it("names a failure by the line before its traceback, or the traceback's last line", () => {
    expect(causeOf("rank 1 exited with 1: Traceback (most recent call last):\n  File \"x\", line 1\nKeyError: 'w'")).toBe("rank 1 exited with 1");
    expect(causeOf("Traceback (most recent call last):\n  File \"x\", line 1\n    f()\n    ^^^\nKeyError: 'w'")).toBe("KeyError: 'w'");
    expect(causeOf("waiting for a worker of bob")).toBe("waiting for a worker of bob");
  });

  it("lists roles from the assignments before the job is placed", () => {
    const rows = roleRows(job({ attempts: [] }));
    expect(rows.map((r) => [r.party, r.role, r.worker])).toEqual([
      ["bob", "server", "1 process, not placed yet"],
      ["alice", "worker", "2 processes, not placed yet"],
    ]);
  });
});
