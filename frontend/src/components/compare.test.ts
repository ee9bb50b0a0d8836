import { describe, expect, it } from "vitest";
import { job } from "../test-fixtures";
import { configDiff } from "./compare";

describe("configDiff", () => {
  it("lists every party of a role, so jobs differing in one of them show it", () => {
    const assignment = (party: string) => ({ party, role: "trainer", processes: 1, dataset: null, capacity: null, options: {} });
    const two = job({ id: "a", assignments: [assignment("alice"), assignment("bob")] });
    const one = job({ id: "b", assignments: [assignment("alice")] });
    expect(configDiff([two, one]).find((r) => r.path === "roles.trainer")?.values).toEqual(["alice ×1, bob ×1", "alice ×1"]);
  });
});
