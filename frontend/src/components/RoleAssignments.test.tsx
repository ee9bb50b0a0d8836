import { fireEvent, render, screen } from "@testing-library/react";
import { useState } from "react";
import { describe, expect, it } from "vitest";
import type { AlgorithmPublic, PartyPublic } from "../api/client";
import { initialAssignments, RoleAssignments, toAssignments } from "./RoleAssignments";

const algorithm: AlgorithmPublic = {
  name: "split_nn",
  title: "Split learning",
  description: "",
  config_schema: {},
  metrics: [],
  one_device_type: false,
  roles: [
    { name: "feature", min: 1, max: null, description: "", devices: ["cpu"], gpu_benefit: false, device_note: "", sees_metrics: ["*"] },
    { name: "middle", min: 0, max: 1, description: "", devices: ["cpu"], gpu_benefit: false, device_note: "", sees_metrics: ["*"] },
    { name: "label", min: 1, max: 1, description: "", devices: ["cpu"], gpu_benefit: false, device_note: "", sees_metrics: ["*"] },
  ],
};
const party = (name: string): PartyPublic => ({ id: name, name, display_name: name, description: "", created_at: "", disabled: false });
const parties = [party("alice"), party("bob")];

function Harness() {
  const [value, setValue] = useState(initialAssignments(algorithm, parties));
  return (
    <>
      <RoleAssignments algorithm={algorithm} parties={parties} workers={[]} value={value} onChange={setValue} errors={{}} />
      <output data-testid="value">{JSON.stringify(toAssignments(value))}</output>
    </>
  );
}

describe("RoleAssignments", () => {
  it("starts with the minimum per role and respects the maximum", () => {
    render(<Harness />);
    const value = () => JSON.parse(screen.getByTestId("value").textContent!);
    expect(value().map((a: { role: string }) => a.role)).toEqual(["feature", "label"]);
    expect(screen.getByRole("button", { name: "Add label party" })).toBeDisabled();
    fireEvent.click(screen.getByRole("button", { name: "Add middle party" }));
    expect(screen.getByRole("button", { name: "Add middle party" })).toBeDisabled();
    expect(value()).toHaveLength(3);
    expect(screen.getAllByText("no worker online")).toHaveLength(3);
  });

  it("rejects options that are not JSON", () => {
    expect(() => toAssignments([{ party: "a", role: "feature", processes: 1, dataset: "", options: "{" }])).toThrow(/JSON/);
  });
});
