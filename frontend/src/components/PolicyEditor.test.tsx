import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { AlgorithmPublic, PartyPolicy } from "../api/client";
import { json, renderSignedIn, stubApi } from "../test-utils";
import { PolicyPanel, policySummary } from "./PolicyEditor";

const algorithm = (name: string): AlgorithmPublic => ({ name, title: name, description: "", config_schema: {}, metrics: [], roles: [], one_device_type: false });
const algorithms = ["ddp", "split_nn", "hier_sync"].map(algorithm);

function carolsPolicy(initial: PartyPolicy, put?: (body: PartyPolicy) => Response | PartyPolicy) {
  return stubApi({
    "GET /api/v1/parties/carol/policy": () => initial,
    "GET /api/v1/algorithms": () => algorithms,
    "PUT /api/v1/parties/carol/policy": (call) => (put ? put(call.body as PartyPolicy) : (call.body as PartyPolicy)),
  });
}

describe("PolicyPanel", () => {
  it("shows the policy in one line and saves the whole edited policy with PUT", async () => {
    const calls = carolsPolicy({ auto_approve_from: ["alice", "admin"], algorithms: null, custom_code: false });
    renderSignedIn(<PolicyPanel party="carol" knownParties={["alice", "bob", "carol"]} open />, { name: "carol" });

    const form = await screen.findByRole("form", { name: "Policy of carol" });
    expect(screen.getByTestId("policy-summary-carol")).toHaveTextContent(
      "auto-approves jobs from alice, admin · algorithms: all shipped · custom code off",
    );
    expect(within(form).queryByRole("checkbox", { name: "carol" })).not.toBeInTheDocument();
    expect(within(form).getByRole("checkbox", { name: "alice" })).toBeChecked();

    fireEvent.click(within(form).getByRole("checkbox", { name: "admin" }));
    fireEvent.click(within(form).getByRole("checkbox", { name: "bob" }));
    fireEvent.change(within(form).getByLabelText("Another party's name"), { target: { value: "dave" } });
    fireEvent.click(within(form).getByRole("button", { name: "Add" }));
    fireEvent.click(within(form).getByRole("radio", { name: /only these/ }));
    fireEvent.click(within(form).getByRole("checkbox", { name: "split_nn" }));
    fireEvent.click(within(form).getByRole("checkbox", { name: /custom model/ }));
    fireEvent.click(within(form).getByRole("button", { name: "Save policy" }));

    await waitFor(() => expect(calls.some((c) => c.method === "PUT")).toBe(true));
    const put = calls.find((c) => c.method === "PUT")!;
    expect(put.path).toBe("/api/v1/parties/carol/policy");
    expect(put.body).toEqual({ auto_approve_from: ["alice", "bob", "dave"], algorithms: ["ddp", "hier_sync"], custom_code: true });
    expect(await screen.findByRole("status")).toHaveTextContent("Saved.");
    expect(screen.getByTestId("policy-summary-carol")).toHaveTextContent("auto-approves jobs from alice, bob, dave · algorithms: ddp, hier_sync · custom code on");
  });

  it("sends null for every shipped algorithm", async () => {
    const calls = carolsPolicy({ auto_approve_from: [], algorithms: ["ddp"], custom_code: false });
    renderSignedIn(<PolicyPanel party="carol" knownParties={[]} open />, { name: "carol" });

    const form = await screen.findByRole("form", { name: "Policy of carol" });
    expect(within(form).getByRole("checkbox", { name: "ddp" })).toBeChecked();
    expect(within(form).getByRole("checkbox", { name: "split_nn" })).not.toBeChecked();
    fireEvent.click(within(form).getByRole("radio", { name: /every shipped/ }));
    fireEvent.click(within(form).getByRole("button", { name: "Save policy" }));

    await waitFor(() => expect(calls.find((c) => c.method === "PUT")?.body).toEqual({ auto_approve_from: [], algorithms: null, custom_code: false }));
  });

  it("shows the server's refusal beside the field, naming the entry", async () => {
    carolsPolicy({ auto_approve_from: [], algorithms: null, custom_code: false }, () =>
      json(
        {
          title: "Unprocessable Content",
          status: 422,
          detail: "no party named 'nobody'",
          code: "unknown_party",
          errors: [{ loc: ["body", "auto_approve_from", 1], msg: "no party named 'nobody'" }],
        },
        422,
      ),
    );
    renderSignedIn(<PolicyPanel party="carol" knownParties={["alice"]} open />, { name: "carol" });

    const form = await screen.findByRole("form", { name: "Policy of carol" });
    fireEvent.click(within(form).getByRole("checkbox", { name: "alice" }));
    fireEvent.change(within(form).getByLabelText("Another party's name"), { target: { value: "nobody" } });
    fireEvent.click(within(form).getByRole("button", { name: "Add" }));
    fireEvent.click(within(form).getByRole("button", { name: "Save policy" }));

    const alert = await within(form).findByRole("alert");
    expect(alert).toHaveTextContent("nobody: no party named 'nobody'");
    expect(within(form).getByRole("group", { name: /Approve without asking/ })).toHaveAccessibleDescription("nobody: no party named 'nobody'");
  });

  it("summarises a closed policy", () => {
    expect(policySummary({ auto_approve_from: [], algorithms: [], custom_code: false })).toBe(
      "auto-approves jobs from nobody · algorithms: none · custom code off",
    );
  });
});
