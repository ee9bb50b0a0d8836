import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { Route, Routes, useLocation } from "react-router-dom";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { JobSummary } from "../api/client";
import { renderSignedIn, stubApi } from "../test-utils";
import { JobsPage } from "./JobsPage";

const summary = (id: string, name: string, started: string | null, finished: string | null): JobSummary => ({
  id,
  name,
  algorithm: "split_nn",
  status: finished ? "succeeded" : "running",
  status_reason: "",
  priority: 0,
  device: "cpu",
  created_at: "2026-11-24T08:00:00Z",
  started_at: started,
  finished_at: finished,
  creator: "admin",
  parties: ["alice", "bob"],
  waiting_for: [],
});

const JOBS = [
  summary("a1", "short", "2026-11-24T08:00:00Z", "2026-11-24T08:00:30Z"),
  summary("b2", "long", "2026-11-24T08:00:00Z", "2026-11-24T08:05:00Z"),
  summary("c3", "queued", null, null),
];

afterEach(() => vi.unstubAllGlobals());

describe("JobsPage", () => {
  it("shows duration, attempts and each job's headline metric, and sorts", async () => {
    const calls = stubApi({
      "GET /api/v1/jobs": () => ({ data: JOBS, count: 3 }),
      "GET /api/v1/job-digests": () => [
        { id: "a1", attempts: 1, metrics: { loss: { value: 0.4, step: 9, rank: 0 }, accuracy: { value: 0.915, step: 9, rank: 0 } } },
        { id: "b2", attempts: 2, metrics: { loss: { value: 0.2, step: 9, rank: 0 } } },
        { id: "c3", attempts: 0, metrics: {} },
      ],
      "GET /api/v1/algorithms": () => [],
      "GET /api/v1/parties": () => ({ data: [], count: 0 }),
      "GET /api/v1/jobs/awaiting": () => ({ data: [], count: 0 }),
    });
    renderSignedIn(
      <Routes>
        <Route path="/" element={<JobsPage />} />
      </Routes>,
      { name: "admin", isAdmin: true },
    );
    const table = await screen.findByRole("table", { name: "Jobs" });
    const short = await within(table).findByRole("row", { name: /short/ });
    await waitFor(() => expect(short).toHaveTextContent("accuracy 91.5%"));
    expect(short).toHaveTextContent("30 s");
    expect(within(table).getByRole("row", { name: /long/ })).toHaveTextContent(/5 min 0 s.*2.*loss 0\.2/);
    expect(within(table).getByRole("row", { name: /queued/ })).toHaveTextContent("—");

    const names = () => within(table).getAllByRole("row").slice(1).map((r) => r.querySelector("a")?.textContent);
    fireEvent.click(within(table).getByRole("button", { name: "Duration" }));
    expect(names()).toEqual(["long", "short", "queued"]);
    fireEvent.click(within(table).getByRole("button", { name: /Duration/ }));
    expect(names()).toEqual(["short", "long", "queued"]);

    fireEvent.click(within(table).getByRole("button", { name: "Name" }));
    await waitFor(() => expect(calls.some((c) => c.path === "/api/v1/jobs" && c.query.get("sort") === "name")).toBe(true));
    const digestCall = calls.find((c) => c.path === "/api/v1/job-digests")!;
    expect(digestCall.query.getAll("ids")).toEqual(["a1", "b2", "c3"]);
  });

  it("shows each job's tags as chips; a click lists the jobs with that tag, kept in the URL, until cleared", async () => {
    const tagged = [
      { ...summary("a1", "short", null, null), tags: ["baseline", "sweep:lr/0.1"] },
      { ...summary("b2", "long", null, null), tags: ["sweep:lr/0.1"] },
      summary("c3", "untagged", null, null),
    ];
    const calls = stubApi({
      "GET /api/v1/jobs": ({ query }) => {
        if (query.get("awaiting_approval") === "true") return { data: [], count: 0 };
        const tag = query.get("tag");
        const data = tag ? tagged.filter((j) => j.tags?.includes(tag)) : tagged;
        return { data, count: data.length };
      },
      "GET /api/v1/job-digests": () => [],
      "GET /api/v1/algorithms": () => [],
      "GET /api/v1/parties": () => ({ data: [], count: 0 }),
    });
    function Where() {
      return <output data-testid="where">{useLocation().search}</output>;
    }
    renderSignedIn(
      <Routes>
        <Route
          path="/"
          element={
            <>
              <JobsPage />
              <Where />
            </>
          }
        />
      </Routes>,
      { name: "admin", isAdmin: true },
      "/?status=queued",
    );
    const table = await screen.findByRole("table", { name: "Jobs" });
    const short = await within(table).findByRole("row", { name: /short/ });
    expect(within(short).getAllByRole("button").map((b) => b.textContent)).toEqual(["baseline", "sweep:lr/0.1"]);
    expect(within(within(table).getByRole("row", { name: /untagged/ })).queryAllByRole("button")).toHaveLength(0);
    expect(screen.queryByRole("status", { name: "Tag filter" })).toBeNull();

    fireEvent.click(within(short).getByRole("button", { name: "baseline" }));
    await waitFor(() => expect(within(table).queryByRole("row", { name: /long/ })).toBeNull());
    expect(within(table).getByRole("row", { name: /short/ })).toBeInTheDocument();
    const listed = () => calls.filter((c) => c.path === "/api/v1/jobs" && !c.query.has("awaiting_approval"));
    const last = listed().at(-1)!;
    expect(last.query.get("tag")).toBe("baseline");
    expect(last.query.get("status")).toBe("queued");
    expect(new URLSearchParams(screen.getByTestId("where").textContent ?? "").get("tag")).toBe("baseline");
    expect(screen.getByRole("status", { name: "Tag filter" })).toHaveTextContent("baseline");

    fireEvent.click(screen.getByRole("button", { name: "Clear the tag filter baseline" }));
    await within(table).findByRole("row", { name: /long/ });
    expect(listed().at(-1)!.query.has("tag")).toBe(false);
    expect(screen.getByTestId("where")).toHaveTextContent("?status=queued");
    expect(screen.queryByRole("status", { name: "Tag filter" })).toBeNull();
  });
});
