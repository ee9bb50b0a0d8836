import { describe, expect, it } from "vitest";
import { runsOn } from "./NewJobPage";

const role = { name: "r", min: 1, max: null, description: "", device_note: "" };

describe("runsOn", () => {
  it("names where a role's ranks can run, from its device contract", () => {
    expect(runsOn({ ...role, devices: ["cpu"], gpu_benefit: false })).toBe("CPU");
    expect(runsOn({ ...role, devices: ["cpu", "cuda"], gpu_benefit: true })).toBe("GPU or CPU (faster on GPU)");
    expect(runsOn({ ...role, devices: ["cpu", "cuda"], gpu_benefit: false })).toBe("CPU or GPU");
  });
});
