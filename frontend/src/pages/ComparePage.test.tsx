import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { Route, Routes } from "react-router-dom";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { JobPublic } from "../api/client";
import { job } from "../test-fixtures";
import { renderSignedIn, stubApi } from "../test-utils";
import { ComparePage } from "./ComparePage";

// uPlot draws on a canvas jsdom lacks: the chart shows what it was given as text
vi.mock("../components/LineChart", () => ({
  LineChart: ({ title, series }: { title: string; series: { label: string }[] }) => (
    <figure aria-label={title}>{series.map((s) => s.label).join(" | ")}</figure>
  ),
}));

const A: JobPublic = job({ id: "aaaaaaaa1", name: "clicks", created_at: "2026-11-20T08:00:00Z", config: { steps: 40, data: { vocab: 500 } } });
const B: JobPublic = job({ id: "bbbbbbbb2", name: "clicks", created_at: "2026-11-21T08:00:00Z", config: { steps: 80, data: { vocab: 500 }, lr: 0.1 } });
const series = (rank: number) => ({ name: "accuracy", rank, downsampled: false, points: [{ step: 1, value: 0.5, min: 0.5, max: 0.5, count: 1 }] });

afterEach(() => vi.unstubAllGlobals());

describe("ComparePage", () => {
  it("picks jobs from a search, overlays a metric from the union of names, and shows differences and final numbers", async () => {
    const calls = stubApi({
      "GET /api/v1/jobs": (c) => ({ data: [A, B].filter((j) => j.name.includes(c.query.get("q") ?? "")), count: 2 }),
      "GET /api/v1/jobs/aaaaaaaa1": () => A,
      "GET /api/v1/jobs/bbbbbbbb2": () => B,
      "GET /api/v1/job-digests": (c) =>
        c.query.getAll("ids").map((id) => ({
          id,
          attempts: 1,
          metrics: id === A.id ? { loss: { value: 0.5, step: 40, rank: 0 }, accuracy: { value: 0.8, step: 40, rank: 1 } } : { loss: { value: 0.25, step: 80, rank: 0 }, auc: { value: 0.9, step: 80, rank: 1 } },
        })),
      "GET /api/v1/jobs/aaaaaaaa1/metrics": () => ({ attempt: 1, series: [series(1), series(0)] }),
      "GET /api/v1/jobs/bbbbbbbb2/metrics": () => ({ attempt: 1, series: [series(0)] }),
    });
    renderSignedIn(
      <Routes>
        <Route path="/compare" element={<ComparePage />} />
      </Routes>,
      { name: "admin", isAdmin: true },
      "/compare",
    );
    const list = await screen.findByRole("region", { name: "Pick jobs" });
    const boxes = await within(list).findAllByRole("checkbox");
    expect(list).toHaveTextContent("aaaaaaaa");
    expect(list).toHaveTextContent("bbbbbbbb");
    fireEvent.click(boxes[0]);
    fireEvent.click(boxes[1]);

    const metric = (await screen.findByLabelText("Metric")) as HTMLSelectElement;
    await waitFor(() => expect([...metric.options].map((o) => o.value)).toEqual(["accuracy", "auc", "loss"]));
    expect(metric.value).toBe("loss");
    fireEvent.change(metric, { target: { value: "accuracy" } });
    const chart = await screen.findByRole("figure", { name: "accuracy by job" });
    await waitFor(() => expect(chart.textContent!.split(" | ")).toHaveLength(3));
    // grouped by job, ranks in order; two jobs named alike told apart by date and id
    expect(chart.textContent).toMatch(/^clicks · .* · aaaaaaaa r0 \| clicks · .* · aaaaaaaa r1 \| clicks · .* · bbbbbbbb r0$/);

    const finals = screen.getByRole("region", { name: "Final metrics" });
    expect(within(finals).getByRole("row", { name: /^loss/ })).toHaveTextContent(/loss\s*0\.5\s*0\.25/);
    expect(within(finals).getByRole("row", { name: /^auc/ })).toHaveTextContent(/auc\s*—\s*90%/);

    const diff = screen.getByRole("region", { name: "Configuration differences" });
    await within(diff).findByText("config.steps");
    expect(within(diff).getByRole("row", { name: /config\.steps/ })).toHaveTextContent(/40\s*80/);
    expect(within(diff).getByRole("row", { name: /config\.lr/ })).toHaveTextContent("(default)");
    expect(within(diff).queryByText("config.data.vocab")).toBeNull();

    fireEvent.change(within(list).getByLabelText("Search jobs"), { target: { value: "zzz" } });
    await within(list).findByText("No job matches.");
    expect(calls.some((c) => c.path === "/api/v1/jobs" && c.query.get("q") === "zzz")).toBe(true);
  });
});
