import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { Route, Routes } from "react-router-dom";
import { describe, expect, it, vi } from "vitest";
import type { JobPublic, Series } from "../api/client";
import { ConnectionBanner } from "../components/ConnectionBanner";
import { Backoff } from "../hooks/backoff";
import { job, paramServer } from "../test-fixtures";
import { json, renderSignedIn, stubApi, type Routes as Stubs } from "../test-utils";
import { JobDetailPage } from "./JobDetailPage";

// uPlot draws on a canvas jsdom lacks; the charts have their own tests
vi.mock("../components/MetricCharts", () => ({ MetricCharts: () => null }));

const TRACE = [
  "worker error: ValueError('bad vocab')",
  "Traceback (most recent call last):",
  '  File "/w/rank.py", line 3, in run',
  "    table.grow(n)",
  "ValueError: bad vocab",
].join("\n");

const task = (id: string, party: string, ranks: [number, string, string][], status: string, reason: string | null = null) => ({
  id,
  party,
  worker_id: `w-${party}-0000000`,
  ranks: ranks.map(([rank, role, device]) => ({ rank, role, device, backend: "gloo" as const })),
  status,
  reason,
  exit_code: null,
  failed_rank: null,
  created_at: "2026-11-24T08:00:01Z",
  started_at: "2026-11-24T08:00:05Z",
  finished_at: "2026-11-24T08:01:05Z",
});

function finished(status: string, reason = ""): JobPublic {
  return job({
    status,
    status_reason: reason,
    attempts: [
      {
        number: 1,
        status,
        created_at: "2026-11-24T08:00:00Z",
        started_at: "2026-11-24T08:00:05Z",
        finished_at: "2026-11-24T08:01:05Z",
        failure_code: null,
        failure_reason: null,
        resume_from: null,
        tasks: [
          task("t1", "bob", [[0, "server", "cpu"]], status === "failed" ? "failed" : "succeeded", status === "failed" ? TRACE : null),
          task("t2", "alice", [[1, "worker", "cpu"], [2, "worker", "cpu"]], status === "failed" ? "cancelled" : "succeeded"),
        ],
      },
    ],
  });
}

const points = (values: number[]) => values.map((value, i) => ({ step: (i + 1) * 10, value, min: value, max: value, count: 1 }));
const series: Series[] = [
  { name: "loss", rank: 1, downsampled: false, points: points([0.9, 0.4, 0.5]) },
  { name: "loss", rank: 2, downsampled: false, points: points([0.8, 0.3, 0.35]) },
  { name: "auc", rank: 1, downsampled: false, points: points([0.6, 0.75, 0.7]) },
  { name: "progress", rank: 1, downsampled: false, points: points([0.3, 0.6, 1]) },
];

function stub(j: JobPublic | (() => JobPublic), net = { down: false }, more: Stubs = {}) {
  const routes = stubApi({
    ...more,
    "GET /api/v1/jobs/j1": () => (typeof j === "function" ? j() : j),
    "GET /api/v1/jobs/j1/metrics": () => ({ series }),
    "GET /api/v1/jobs/j1/transitions": () => [],
    "GET /api/v1/jobs/j1/checkpoints": () => [],
    "GET /api/v1/jobs/j1/logs": () => ({ data: [], count: 0 }),
    "GET /api/v1/algorithms": () => [paramServer],
    "GET /api/v1/workers": () => ({ data: [], count: 0 }),
    "GET /api/v1/version": () => ({ version: "1", api: "v1", algorithms: [] }),
  });
  const answer = globalThis.fetch;
  globalThis.fetch = (async (input: Request | string, init?: RequestInit) => {
    if (net.down) throw new TypeError("Failed to fetch");
    return answer(input, init);
  }) as typeof fetch;
  return routes;
}

function renderJob(who: { name: string; isAdmin?: boolean } = { name: "admin", isAdmin: true }) {
  return renderSignedIn(
    <>
      <ConnectionBanner backoff={() => new Backoff({ baseMs: 10, jitter: 0 })} />
      <Routes>
        <Route path="/jobs/:jobId" element={<JobDetailPage />} />
        <Route path="/jobs/new" element={<p>new job form</p>} />
      </Routes>
    </>,
    who,
    "/jobs/j1",
  );
}

describe("JobDetailPage", () => {
  it("shows the overview, the final and best metrics, the roles and the configuration; no Retry once succeeded", async () => {
    stub(finished("succeeded"));
    renderJob();
    const overview = await screen.findByRole("region", { name: "Overview" });
    expect(within(overview).getByTestId("duration")).toHaveTextContent("1 min 0 s");
    const loss = await screen.findByRole("row", { name: /^loss/ });
    // rank 1's loss: final 0.5, best 0.4 at step 20
    expect(loss).toHaveTextContent("0.5");
    expect(loss).toHaveTextContent("0.4 at step 20");
    expect(screen.getByRole("row", { name: /^auc/ })).toHaveTextContent("0.75 at step 20");

    const roles = screen.getByRole("table", { name: "Roles" });
    const worker = within(roles).getByRole("row", { name: /alice/ });
    expect(worker).toHaveTextContent("worker");
    expect(worker).toHaveTextContent("1, 2");
    expect(worker).toHaveTextContent("gloo");

    const config = screen.getByRole("region", { name: "Configuration" });
    await within(config).findByText("(changed; default 500)");
    const steps = config.querySelector('[data-path="steps"]')!;
    expect(steps).toHaveClass("changed");
    expect(config.querySelector('[data-path="mode"]')).not.toHaveClass("changed");
    expect(config.querySelector('[data-path="data.vocab"]')).toHaveClass("changed");

    expect(screen.queryByRole("button", { name: "Retry" })).toBeNull();
    fireEvent.click(screen.getByRole("link", { name: "Run again with changes" }));
    await screen.findByText("new job form");
  });

  it("shows a failure as its one-line cause with the traceback folded", async () => {
    stub(finished("failed", TRACE));
    renderJob();
    const failure = await screen.findByRole("note", { name: "Why the job ended" });
    expect(failure.querySelector("summary")).toHaveTextContent(/^worker error: ValueError\('bad vocab'\)$/);
    expect(failure.querySelector("details")).not.toHaveAttribute("open");
    expect(screen.getByRole("button", { name: "Retry" })).toBeInTheDocument();
    const row = within(screen.getByRole("table", { name: "Roles" })).getByRole("row", { name: /bob/ });
    expect(row.querySelector("summary")).toHaveTextContent(/^worker error: ValueError\('bad vocab'\)$/);
    expect(row.querySelector("details")).not.toHaveAttribute("open");
    expect(row.querySelector("details pre")).toHaveTextContent("Traceback (most recent call last)");
  });

  it("keeps the page and shows a banner while the server cannot be reached, then reads it afresh", async () => {
    const net = { down: false };
    const calls = stub(finished("succeeded"), net);
    const { queryClient } = renderJob();
    await screen.findByRole("table", { name: "Roles" });
    net.down = true;
    await queryClient.invalidateQueries();
    await screen.findByTestId("connection-lost");
    expect(screen.getByRole("table", { name: "Roles" })).toBeInTheDocument();
    expect(screen.queryByText(/Failed to fetch/)).toBeNull();
    const before = calls.filter((c) => c.path === "/api/v1/jobs/j1").length;
    net.down = false;
    await waitFor(() => expect(screen.queryByTestId("connection-lost")).toBeNull());
    await waitFor(() => expect(calls.filter((c) => c.path === "/api/v1/jobs/j1").length).toBeGreaterThan(before));
    expect(calls.some((c) => c.path === "/api/v1/version")).toBe(true);
  });

  it("shows the tags as links to the jobs carrying them, and lets the creator change them", async () => {
    let current: JobPublic = { ...finished("succeeded"), creator: "party:alice", tags: ["baseline", "v1"] };
    const refused = { title: "Unprocessable Entity", status: 422, code: "invalid_request", errors: [{ loc: ["body", "tags", 1], msg: "a tag starts with a letter or a digit" }] };
    const calls = stub(() => current, undefined, {
      "PUT /api/v1/jobs/j1/tags": ({ body }) => {
        const { tags } = body as { tags: string[] };
        if (tags.includes("-x")) return json(refused, 422);
        current = { ...current, tags };
        return current;
      },
    });
    renderJob({ name: "alice" });
    const tags = await screen.findByRole("group", { name: "Tags" });
    expect(within(tags).getByRole("link", { name: "baseline" })).toHaveAttribute("href", "/jobs?tag=baseline");

    fireEvent.click(within(tags).getByRole("button", { name: "Edit tags" }));
    const input = within(tags).getByLabelText("Tags, separated by commas");
    expect(input).toHaveValue("baseline, v1");
    fireEvent.change(input, { target: { value: "baseline, -x" } });
    fireEvent.click(within(tags).getByRole("button", { name: "Save tags" }));
    expect(await within(tags).findByRole("alert")).toHaveTextContent("“-x”: a tag starts with a letter or a digit");

    fireEvent.change(input, { target: { value: "baseline, v2 , baseline" } });
    fireEvent.click(within(tags).getByRole("button", { name: "Save tags" }));
    await within(tags).findByRole("link", { name: "v2" });
    expect(within(tags).queryByRole("link", { name: "v1" })).toBeNull();
    const puts = calls.filter((c) => c.method === "PUT");
    expect(puts.map((c) => c.body)).toEqual([{ tags: ["baseline", "-x"] }, { tags: ["baseline", "v2"] }]);
  });

  it("offers no tag editor to a party that did not create the job", async () => {
    stub({ ...finished("succeeded"), creator: "admin", tags: ["baseline"] });
    renderJob({ name: "bob" });
    const tags = await screen.findByRole("group", { name: "Tags" });
    expect(within(tags).getByRole("link", { name: "baseline" })).toBeInTheDocument();
    expect(within(tags).queryByRole("button", { name: "Edit tags" })).toBeNull();
  });

  it("lets the admin tag an untagged job", async () => {
    const calls = stub({ ...finished("succeeded"), creator: "party:alice" }, undefined, {
      "PUT /api/v1/jobs/j1/tags": ({ body }) => ({ ...finished("succeeded"), ...(body as object) }),
    });
    renderJob();
    const tags = await screen.findByRole("group", { name: "Tags" });
    expect(tags).toHaveTextContent("none");
    fireEvent.click(within(tags).getByRole("button", { name: "Edit tags" }));
    fireEvent.change(within(tags).getByLabelText("Tags, separated by commas"), { target: { value: "first" } });
    fireEvent.click(within(tags).getByRole("button", { name: "Save tags" }));
    await within(tags).findByRole("link", { name: "first" });
    expect(calls.filter((c) => c.method === "PUT").map((c) => c.body)).toEqual([{ tags: ["first"] }]);
  });
});
