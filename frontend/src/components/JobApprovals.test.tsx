import { screen, within } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { JobPublic } from "../api/client";
import { renderSignedIn, stubApi } from "../test-utils";
import { JobApprovals } from "./JobApprovals";
import { StatusChip } from "./StatusChip";

const job: JobPublic = {
  id: "j1",
  name: "train-digits",
  algorithm: "ddp",
  status: "pending",
  status_reason: "waiting for approval by carol",
  priority: 0,
  device: "auto",
  created_at: "2026-11-24T08:00:00Z",
  started_at: null,
  finished_at: null,
  creator: "alice",
  parties: ["alice", "bob", "carol"],
  waiting_for: ["carol"],
  config: {},
  assignments: [],
  attempts: [],
  approvals: [
    { party: "alice", decision: "approved", reason: "created the job", decided_by: "alice", decided_at: "2026-11-24T08:00:00Z" },
    { party: "bob", decision: "approved", reason: "approves jobs from alice", decided_by: "policy", decided_at: "2026-11-24T08:00:00Z" },
    { party: "carol", decision: "pending", reason: "", decided_by: null, decided_at: null },
  ],
};

describe("JobApprovals", () => {
  it("shows every party's answer and who gave it", () => {
    stubApi({});
    renderSignedIn(<JobApprovals job={job} />, { name: "admin", isAdmin: true });
    const rows = within(screen.getByRole("table", { name: "Approvals by party" })).getAllByRole("row");
    expect(rows[1]).toHaveTextContent(/alice.*approved.*alice.*created the job/);
    expect(rows[2]).toHaveTextContent(/bob.*approved.*policy \(auto-approval\).*approves jobs from alice/);
    expect(rows[3]).toHaveTextContent(/carol.*pending.*—/);
    expect(screen.queryByRole("button", { name: /Approve/ })).not.toBeInTheDocument();
  });

  it("offers Approve and Reject to the party that must answer", () => {
    stubApi({});
    renderSignedIn(<JobApprovals job={job} />, { name: "carol" });
    expect(screen.getByText("Your approval is needed")).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Approve train-digits" })).toBeEnabled();
    expect(screen.getByRole("button", { name: "Reject train-digits" })).toBeEnabled();
  });

  it("offers nothing once the job has left pending or to a party that answered", () => {
    stubApi({});
    const { unmount } = renderSignedIn(<JobApprovals job={{ ...job, status: "rejected" }} />, { name: "carol" });
    expect(screen.queryByRole("button", { name: /Approve/ })).not.toBeInTheDocument();
    unmount();
    renderSignedIn(<JobApprovals job={job} />, { name: "bob" });
    expect(screen.queryByRole("button", { name: /Approve/ })).not.toBeInTheDocument();
  });
});

describe("StatusChip", () => {
  it("gives rejected its own tone and carries a pending job's reason", () => {
    const { container } = renderSignedIn(
      <>
        <StatusChip status="rejected" />
        <StatusChip status="failed" />
        <StatusChip status="pending" reason="waiting for approval by carol" />
      </>,
      { name: "carol" },
    );
    const [rejected, failed, pending] = container.querySelectorAll(".chip");
    expect(rejected.className).toContain("chip-rejected");
    expect(failed.className).toContain("chip-bad");
    expect(pending).toHaveAttribute("title", "waiting for approval by carol");
    expect(pending).toHaveAttribute("data-status", "pending");
    expect(pending).toHaveTextContent("pending: waiting for approval by carol");
  });
});
