import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { JobPublic, JobSummary } from "../api/client";
import { json, renderSignedIn, stubApi } from "../test-utils";
import { AwaitingApprovals } from "./AwaitingApprovals";

const summary = (id: string, name: string): JobSummary => ({
  id,
  name,
  algorithm: "ddp",
  status: "pending",
  status_reason: "waiting for approval by carol",
  priority: 0,
  device: "auto",
  created_at: "2026-11-24T08:00:00Z",
  started_at: null,
  finished_at: null,
  creator: "alice",
  parties: ["alice", "carol"],
  waiting_for: ["carol"],
});

const full = (s: JobSummary, patch: Partial<JobPublic> = {}): JobPublic => ({
  ...s,
  config: { steps: 30, lr: 0.1 },
  assignments: [
    { party: "alice", role: "trainer", processes: 1, dataset: null, capacity: null, options: {} },
    { party: "carol", role: "trainer", processes: 1, dataset: "sklearn:digits", capacity: null, options: {} },
  ],
  approvals: [],
  attempts: [],
  ...patch,
});

/** carol has two jobs to answer until she answers one; then one. */
function carolsApi(answer: (verb: string) => Response | JobPublic) {
  let waiting = [summary("j1", "train-digits"), summary("j2", "train-mnist")];
  const calls = stubApi({
    "GET /api/v1/jobs": () => ({ data: waiting, count: waiting.length }),
    "GET /api/v1/jobs/j1": () => full(waiting[0]),
    "POST /api/v1/jobs/j1/approve": () => {
      const reply = answer("approve");
      if (!(reply instanceof Response)) waiting = waiting.filter((j) => j.id !== "j1");
      return reply;
    },
    "POST /api/v1/jobs/j1/reject": () => {
      const reply = answer("reject");
      if (!(reply instanceof Response)) waiting = waiting.filter((j) => j.id !== "j1");
      return reply;
    },
  });
  return calls;
}

describe("AwaitingApprovals", () => {
  it("lists the jobs the party must answer with what they would run", async () => {
    const calls = carolsApi(() => full(summary("j1", "train-digits")));
    renderSignedIn(<AwaitingApprovals />, { name: "carol" });

    const table = await screen.findByRole("table", { name: "Waiting for your approval" });
    const row = within(table).getByRole("link", { name: "train-digits" }).closest("tr")!;
    expect(row).toHaveTextContent("ddp");
    expect(row).toHaveTextContent("alice, carol");
    expect(within(table).getAllByRole("row")).toHaveLength(3);
    expect(calls[0].query.get("awaiting_approval")).toBe("true");

    fireEvent.click(within(row).getByText("Configuration"));
    const details = row.querySelector("details")!;
    details.open = true;
    fireEvent(details, new Event("toggle"));
    expect(await within(row).findByText(/steps: 30/)).toBeInTheDocument();
    expect(within(row).getByText(/carol as trainer · sklearn:digits/)).toBeInTheDocument();
  });

  it("approves, then refreshes the list", async () => {
    const calls = carolsApi(() => full(summary("j1", "train-digits"), { status: "queued", waiting_for: [] }));
    renderSignedIn(<AwaitingApprovals />, { name: "carol" });

    fireEvent.click(await screen.findByRole("button", { name: "Approve train-digits" }));

    expect(await screen.findByRole("status")).toHaveTextContent("Approved train-digits: now queued.");
    await waitFor(() => expect(screen.queryByRole("link", { name: "train-digits" })).not.toBeInTheDocument());
    const approve = calls.find((c) => c.path === "/api/v1/jobs/j1/approve")!;
    expect(approve).toMatchObject({ method: "POST", body: { reason: "" } });
    expect(calls.filter((c) => c.path === "/api/v1/jobs")).not.toHaveLength(1);
  });

  it("asks for a reason before rejecting and sends it", async () => {
    const calls = carolsApi(() => full(summary("j1", "train-digits"), { status: "rejected" }));
    renderSignedIn(<AwaitingApprovals />, { name: "carol" });

    fireEvent.click(await screen.findByRole("button", { name: "Reject train-digits" }));
    expect(calls.some((c) => c.path.endsWith("/reject"))).toBe(false);
    fireEvent.change(screen.getByLabelText("Reason for rejecting train-digits"), { target: { value: "our data may not leave" } });
    fireEvent.click(screen.getByRole("button", { name: "Confirm reject" }));

    expect(await screen.findByRole("status")).toHaveTextContent("Rejected train-digits.");
    expect(calls.find((c) => c.path === "/api/v1/jobs/j1/reject")).toMatchObject({ method: "POST", body: { reason: "our data may not leave" } });
  });

  it("shows the API's problem when an answer is refused", async () => {
    carolsApi(() =>
      json({ title: "Conflict", status: 409, detail: "job j1 is cancelled; approvals are decided while it is pending", code: "approval_closed" }, 409),
    );
    renderSignedIn(<AwaitingApprovals />, { name: "carol" });

    fireEvent.click(await screen.findByRole("button", { name: "Approve train-digits" }));

    const alert = await screen.findByRole("alert");
    expect(alert).toHaveTextContent("Could not approve train-digits");
    expect(alert).toHaveTextContent("approvals are decided while it is pending (approval_closed)");
  });

  it("shows the admin whom each job waits for, without answering for anyone", async () => {
    stubApi({ "GET /api/v1/jobs": () => ({ data: [summary("j1", "train-digits")], count: 1 }) });
    renderSignedIn(<AwaitingApprovals />, { name: "admin", isAdmin: true });

    const table = await screen.findByRole("table", { name: "Waiting for approval" });
    expect(within(table).getByRole("columnheader", { name: "Waiting for" })).toBeInTheDocument();
    expect(within(table).queryByRole("button", { name: /Approve/ })).not.toBeInTheDocument();
  });

  it("renders nothing when no job waits", async () => {
    const calls = stubApi({ "GET /api/v1/jobs": () => ({ data: [], count: 0 }) });
    const { container } = renderSignedIn(<AwaitingApprovals />, { name: "carol" });
    await waitFor(() => expect(calls).toHaveLength(1));
    expect(container).toBeEmptyDOMElement();
  });
});
