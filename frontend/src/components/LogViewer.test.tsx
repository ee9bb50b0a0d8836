import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { useState } from "react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { JobPublic } from "../api/client";
import { job } from "../test-fixtures";
import { renderSignedIn, stubApi } from "../test-utils";
import { LogViewer } from "./LogViewer";
import { filterLines, NO_FILTER, taskNames } from "./logLines";

const task = (id: string, party: string, ranks: [number, string][]) => ({
  id,
  party,
  worker_id: `w-${party}`,
  ranks: ranks.map(([rank, role]) => ({ rank, role, device: "cpu", backend: "gloo" as const })),
  status: "succeeded",
  reason: null,
  exit_code: null,
  failed_rank: null,
  created_at: "2026-11-24T08:00:01Z",
  started_at: "2026-11-24T08:00:05Z",
  finished_at: "2026-11-24T08:01:05Z",
});

const splitJob: JobPublic = job({
  status: "succeeded",
  attempts: [
    {
      number: 1,
      status: "succeeded",
      created_at: "2026-11-24T08:00:00Z",
      started_at: "2026-11-24T08:00:05Z",
      finished_at: "2026-11-24T08:01:05Z",
      failure_code: null,
      failure_reason: null,
      resume_from: null,
      tasks: [task("aaaa1111bbbb", "alice", [[0, "labels"]]), task("cccc2222dddd", "bob", [[1, "features"], [2, "labels"]])],
    },
  ],
});

let id = 0;
const line = (task_id: string, rank: number, level: string, message: string) => ({ id: ++id, task_id, rank, level, message, time: "2026-11-24T08:00:10Z" });
const LINES = [
  line("aaaa1111bbbb", 0, "info", "rank 0/3 of job j1 starting"),
  line("cccc2222dddd", 1, "info", "rank 1/3 of job j1 starting"),
  line("cccc2222dddd", 2, "warning", "gloo: slow link"),
  line("aaaa1111bbbb", 0, "info", "progress: step 10/10 (100%) · loss 0.31"),
  line("cccc2222dddd", 2, "error", "Traceback (most recent call last):\n  boom"),
];

afterEach(() => vi.unstubAllGlobals());

describe("filterLines", () => {
  it("keeps lines of a party, a rank, a least level and a text", () => {
    const names = taskNames(splitJob);
    expect(filterLines(LINES, { ...NO_FILTER, party: "bob" }, names).map((l) => l.rank)).toEqual([1, 2, 2]);
    expect(filterLines(LINES, { ...NO_FILTER, rank: "0" }, names)).toHaveLength(2);
    expect(filterLines(LINES, { ...NO_FILTER, minLevel: "warning" }, names).map((l) => l.level)).toEqual(["warning", "error"]);
    expect(filterLines(LINES, { ...NO_FILTER, search: "LOSS" }, names).map((l) => l.rank)).toEqual([0]);
  });
});

describe("LogViewer", () => {
  it("names tasks by party and role, filters, searches and downloads every line", async () => {
    const calls = stubApi({
      "GET /api/v1/jobs/j1/logs": (c) => {
        const after = Number(c.query.get("after"));
        const data = LINES.filter((l) => l.id > after);
        return { data, next_cursor: data.length ? data[data.length - 1].id : after };
      },
    });
    renderSignedIn(<LogViewer job={splitJob} live={false} />, { name: "admin", isAdmin: true });
    const logs = await screen.findByRole("region", { name: "Logs" });
    await within(logs).findByText(/rank 0\/3 of job j1 starting/);
    expect(within(logs).getAllByText(/bob · labels r2/).length).toBe(2);
    expect(within(logs).getAllByText(/bob · features r1/).length).toBe(1);
    expect(within(logs).getAllByText(/alice · labels r0/).length).toBe(2);
    expect(logs.textContent).not.toMatch(/aaaa1111/);
    expect(screen.getByTestId("log-count")).toHaveTextContent("5 lines");

    fireEvent.change(screen.getByLabelText("Party"), { target: { value: "bob" } });
    expect(screen.getByTestId("log-count")).toHaveTextContent("3 of 5 lines");
    expect([...(screen.getByLabelText("Rank") as HTMLSelectElement).options].map((o) => o.value)).toEqual(["", "1", "2"]);
    fireEvent.change(screen.getByLabelText("Level"), { target: { value: "error" } });
    expect(screen.getByTestId("log-count")).toHaveTextContent("1 of 5 lines");
    expect(logs.querySelector(".level-error")).toHaveTextContent("boom");
    fireEvent.change(screen.getByLabelText("Level"), { target: { value: "debug" } });
    fireEvent.change(screen.getByLabelText("Party"), { target: { value: "" } });
    fireEvent.change(screen.getByLabelText("Search the logs"), { target: { value: "progress" } });
    expect(screen.getByTestId("log-count")).toHaveTextContent("1 of 5 lines");

    const saved: Blob[] = [];
    vi.stubGlobal("URL", Object.assign(URL, { createObjectURL: (b: Blob) => (saved.push(b), "blob:x"), revokeObjectURL: () => {} }));
    const click = vi.spyOn(HTMLAnchorElement.prototype, "click").mockImplementation(() => {});
    fireEvent.click(screen.getByRole("button", { name: "Download" }));
    await waitFor(() => expect(saved).toHaveLength(1));
    const text = await saved[0].text();
    expect(text.match(/^2026-11-24T08:00:10Z /gm)).toHaveLength(5);
    expect(text).toContain("bob · labels r2 WARNING gloo: slow link");
    expect(click).toHaveBeenCalled();
    expect(calls.filter((c) => c.path.endsWith("/logs")).every((c) => !c.query.has("task_id"))).toBe(true);
  });

  it("reads the last lines once more when the job ends", async () => {
    const available: typeof LINES = [];
    stubApi({
      "GET /api/v1/jobs/j1/logs": (c) => {
        const data = available.filter((l) => l.id > Number(c.query.get("after")));
        return { data, next_cursor: data.length ? data[data.length - 1].id : Number(c.query.get("after")) };
      },
    });
    function Ending() {
      const [live, setLive] = useState(true);
      return (
        <>
          <button onClick={() => setLive(false)}>end</button>
          <LogViewer job={splitJob} live={live} />
        </>
      );
    }
    renderSignedIn(<Ending />, { name: "admin", isAdmin: true });
    await screen.findByText("No log lines yet.");
    available.push(line("aaaa1111bbbb", 0, "info", "rank 0 stopped: the job was cancelled"));
    fireEvent.click(screen.getByRole("button", { name: "end" }));
    await screen.findByText(/rank 0 stopped: the job was cancelled/);
    expect(screen.getByTestId("log-count")).toHaveTextContent("1 lines");
  });
});
