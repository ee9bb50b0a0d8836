import { fireEvent, render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { Schemas } from "../api/client";
import { canDownload, Checkpoints, completeSteps, groupCheckpoints } from "./Checkpoints";

const at = (attempt: number, step: number, rank: number, party: string, shared = true, kind: "checkpoint" | "export" | "model" = "checkpoint"): Schemas["CheckpointPublic"] => ({
  attempt,
  kind,
  step,
  rank,
  party,
  shared,
  uri: `/ck/${step}`,
  size: 2048,
  sha256: "ab".repeat(32),
  created_at: "2026-11-25T00:00:00Z",
});

const alice = { token: "t", name: "alice", isAdmin: false };
const admin = { token: "t", name: "admin", isAdmin: true };

describe("checkpoints", () => {
  it("groups ranks by attempt, kind and step: results first, then checkpoints newest first", () => {
    const groups = groupCheckpoints([at(1, 5, 1, "bob"), at(1, 5, 0, "alice"), at(1, 10, 0, "alice"), at(2, 5, 0, "alice"), at(1, 10, 0, "alice", true, "export")]);
    expect(groups.map((g) => [g.attempt, g.kind, g.step, g.ranks.map((r) => r.rank)])).toEqual([
      [2, "checkpoint", 5, [0]],
      [1, "export", 10, [0]],
      [1, "checkpoint", 10, [0]],
      [1, "checkpoint", 5, [0, 1]],
    ]);
  });

  it("resumes only from steps every rank saved", () => {
    const saved = [at(1, 5, 0, "alice"), at(1, 5, 1, "bob"), at(1, 10, 0, "alice"), at(2, 15, 1, "bob"), at(2, 15, 0, "alice")];
    expect(completeSteps(saved, [0, 1])).toEqual([15, 5]);
    // an export of every rank is no place to resume from
    expect(completeSteps([at(1, 20, 0, "alice", true, "export"), at(1, 20, 1, "bob", true, "export")], [0, 1])).toEqual([]);
    expect(completeSteps(saved, [])).toEqual([]);
  });

  it("offers a file only to its party or the admin, and only when shared", () => {
    expect(canDownload(at(1, 5, 0, "alice"), alice)).toBe(true);
    expect(canDownload(at(1, 5, 1, "bob"), alice)).toBe(false);
    expect(canDownload(at(1, 5, 1, "bob"), admin)).toBe(true);
    expect(canDownload(at(1, 5, 0, "alice", false), alice)).toBe(false);
  });

  it("shows ten steps at first, then ten more at a time", () => {
    const many = Array.from({ length: 25 }, (_, i) => at(1, (i + 1) * 10, 0, "alice"));
    render(<Checkpoints jobId="j1" identity={alice} checkpoints={many} />);
    expect(screen.getAllByRole("button", { name: /^Download checkpoint/ })).toHaveLength(10);
    fireEvent.click(screen.getByRole("button", { name: "Show 10 more of 15" }));
    expect(screen.getAllByRole("button", { name: /^Download checkpoint/ })).toHaveLength(20);
    expect(screen.getByRole("button", { name: "Download checkpoint step 250 rank 0" })).toBeInTheDocument();
  });

  it("shows a download for the viewer's own shared ranks", () => {
    render(<Checkpoints jobId="j1" identity={alice} checkpoints={[at(1, 5, 0, "alice"), at(1, 5, 1, "bob"), at(1, 5, 2, "alice", false)]} />);
    expect(screen.getByRole("button", { name: "Download checkpoint step 5 rank 0" })).toBeInTheDocument();
    expect(screen.queryByRole("button", { name: "Download checkpoint step 5 rank 1" })).toBeNull();
    expect(screen.getByText("its party's")).toBeInTheDocument();
    expect(screen.getByText("on its host")).toBeInTheDocument();
  });
});
