import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { Route, Routes } from "react-router-dom";
import { describe, expect, it } from "vitest";
import { directory, job, paramServer, zoPair } from "../test-fixtures";
import { json, renderSignedIn, stubApi, type Call } from "../test-utils";
import { copyName, NewJobPage, runsOn, seesOfOthers } from "./NewJobPage";

const role = { name: "r", min: 1, max: null, description: "", device_note: "", sees_metrics: ["*"] };

describe("runsOn", () => {
  it("names where a role's ranks can run, from its device contract", () => {
    expect(runsOn({ ...role, devices: ["cpu"], gpu_benefit: false })).toBe("CPU");
    expect(runsOn({ ...role, devices: ["cpu", "cuda"], gpu_benefit: true })).toBe("GPU or CPU (faster on GPU)");
    expect(runsOn({ ...role, devices: ["cpu", "cuda"], gpu_benefit: false })).toBe("CPU or GPU");
  });
});

describe("seesOfOthers", () => {
  it("says what a role's parties read of other parties' ranks", () => {
    const full = { ...role, devices: ["cpu" as const], gpu_benefit: false };
    expect(seesOfOthers(full)).toBe("every metric");
    expect(seesOfOthers({ ...full, sees_metrics: ["step_time_s", "bytes_*"] })).toBe("how they run (no results, no logs)");
  });
});

describe("copyName", () => {
  it("numbers copies", () => {
    expect(copyName("clicks")).toBe("clicks (2)");
    expect(copyName("clicks (2)")).toBe("clicks (3)");
  });
});

function api(reply: (call: Call) => Response | object = () => json({ ...job(), id: "j9" }, 201), source = job()) {
  return stubApi({
    "GET /api/v1/algorithms": () => [paramServer, zoPair],
    "GET /api/v1/party-directory": () => directory,
    "GET /api/v1/workers": () => ({ data: [], count: 0 }),
    "GET /api/v1/jobs/j1": () => source,
    "POST /api/v1/jobs": reply,
  });
}

function renderPage(path = "/jobs/new") {
  return renderSignedIn(
    <Routes>
      <Route path="/jobs/new" element={<NewJobPage />} />
      <Route path="/jobs/:id" element={<p>job page</p>} />
    </Routes>,
    { name: "alice" },
    path,
  );
}

const next = (name: string) => fireEvent.click(screen.getByRole("button", { name }));
const posted = (calls: Call[]) => calls.filter((c) => c.method === "POST" && c.path === "/api/v1/jobs").map((c) => c.body as Record<string, unknown>);

describe("NewJobPage", () => {
  it("submits an algorithm with the form's own defaults: only what the user changed is sent", async () => {
    const calls = api();
    renderPage();
    fireEvent.click(await screen.findByRole("button", { name: "Use param_server" }));
    next("Next: roles");
    next("Next: review");
    next("Create job");
    await screen.findByText("job page");
    const [body] = posted(calls);
    expect(body.config).toEqual({});
    expect(body).not.toHaveProperty("tags");
    expect(body.assignments).toEqual([
      { party: "alice", role: "server", processes: 1, dataset: null, options: {} },
      { party: "bob", role: "worker", processes: 1, dataset: null, options: {} },
    ]);
  });

  it("fills the roles with parties when the party list arrives after the algorithm was picked", async () => {
    let release: () => void = () => undefined;
    const arrived = new Promise<void>((resolve) => (release = resolve));
    stubApi({
      "GET /api/v1/algorithms": () => [paramServer, zoPair],
      "GET /api/v1/party-directory": async () => {
        await arrived;
        return directory;
      },
      "GET /api/v1/workers": () => ({ data: [], count: 0 }),
    });
    renderPage();
    fireEvent.click(await screen.findByRole("button", { name: "Use param_server" }));
    next("Next: roles");
    expect((screen.getByRole("combobox", { name: "server party 1" }) as HTMLSelectElement).value).toBe("");
    release();
    await waitFor(() => expect((screen.getByRole("combobox", { name: "server party 1" }) as HTMLSelectElement).value).toBe("alice"));
    expect((screen.getByRole("combobox", { name: "worker party 1" }) as HTMLSelectElement).value).toBe("bob");
  });

  it("offers every party to a party, not only itself", async () => {
    api();
    renderPage();
    fireEvent.click(await screen.findByRole("button", { name: "Use param_server" }));
    next("Next: roles");
    const select = screen.getByRole("combobox", { name: "server party 1" });
    expect(within(select).getAllByRole("option").map((o) => o.textContent)).toEqual(["Alice", "Bob", "Carol"]);
    expect(screen.getAllByText("its workers are not shown to you")).toHaveLength(1);
  });

  it("starts zo_pair with a pair of processors", async () => {
    const calls = api();
    renderPage();
    fireEvent.click(await screen.findByRole("button", { name: "Use zo_pair" }));
    next("Next: roles");
    next("Next: review");
    next("Create job");
    await screen.findByText("job page");
    expect(posted(calls)[0].assignments).toEqual([{ party: "alice", role: "processor", processes: 2, dataset: null, options: {} }]);
  });

  it("applies a preset over the defaults", async () => {
    const calls = api();
    renderPage();
    fireEvent.click(await screen.findByRole("button", { name: "Use param_server" }));
    fireEvent.click(screen.getByRole("button", { name: "Quick demo" }));
    expect(document.getElementById("cfg-steps")).toHaveValue("30");
    expect(screen.getByLabelText("Vocab")).toHaveValue("1000");
    next("Next: roles");
    next("Next: review");
    next("Create job");
    await screen.findByText("job page");
    expect(posted(calls)[0].config).toMatchObject({ steps: 30, data: { vocab: 1000 } });
  });

  it("refuses a name of only spaces before sending", async () => {
    const calls = api();
    renderPage();
    fireEvent.click(await screen.findByRole("button", { name: "Use param_server" }));
    fireEvent.change(screen.getByLabelText("Job name"), { target: { value: "   " } });
    next("Next: roles");
    expect(screen.getByRole("alert")).toHaveTextContent("a job needs a name");
    expect(screen.getByLabelText("Job name")).toHaveAttribute("aria-invalid", "true");
    expect(posted(calls)).toHaveLength(0);
  });

  it("shows the server's error at a nested field and returns to the configuration", async () => {
    api(() =>
      json(
        {
          title: "Unprocessable Entity",
          status: 422,
          detail: "the configuration is invalid",
          code: "invalid_config",
          errors: [{ loc: ["body", "config", "data", "vocab"], msg: "Input should be greater than or equal to 2" }],
        },
        422,
      ),
    );
    renderPage();
    fireEvent.click(await screen.findByRole("button", { name: "Use param_server" }));
    fireEvent.change(screen.getByLabelText("Vocab"), { target: { value: "1" } });
    next("Next: roles");
    next("Next: review");
    next("Create job");
    const message = await waitFor(() => {
      const el = document.getElementById("cfg-data-vocab-error");
      if (!el) throw new Error("no error at data.vocab yet");
      return el;
    });
    expect(message).toHaveTextContent("greater than or equal to 2");
    expect(screen.getByLabelText("Vocab")).toHaveAttribute("aria-invalid", "true");
  });

  it("runs a job again with changes: the form filled from it, and only changes sent", async () => {
    const calls = api();
    renderPage("/jobs/new?from=j1");
    expect(await screen.findByLabelText("Job name")).toHaveValue("clicks (2)");
    expect(document.getElementById("cfg-steps")).toHaveValue("40");
    expect(screen.getByLabelText("Vocab")).toHaveValue("500");
    expect(screen.getByLabelText("Device")).toHaveValue("cpu");
    fireEvent.change(document.getElementById("cfg-steps")!, { target: { value: "80" } });
    next("Next: roles");
    expect(screen.getByRole("combobox", { name: "server party 1" })).toHaveValue("bob");
    next("Next: review");
    next("Create job");
    await screen.findByText("job page");
    const [body] = posted(calls);
    expect(body).toMatchObject({ name: "clicks (2)", algorithm: "param_server", device: "cpu" });
    expect(body.config).toEqual({ steps: 80, hidden: [32], data: { vocab: 500 } });
    expect(body.assignments).toEqual([
      { party: "bob", role: "server", processes: 1, dataset: null, options: {} },
      { party: "alice", role: "worker", processes: 2, dataset: "sklearn:digits", options: { threads: 2 } },
    ]);
  });

  it("sends the tags typed, trimmed and once each, and shows them on review", async () => {
    const calls = api();
    renderPage();
    fireEvent.click(await screen.findByRole("button", { name: "Use param_server" }));
    fireEvent.change(screen.getByLabelText("Tags"), { target: { value: " baseline, sweep:lr/0.1 ,baseline,, " } });
    next("Next: roles");
    next("Next: review");
    const review = screen.getByRole("heading", { level: 3 }).parentElement!;
    expect([...review.querySelectorAll(".chip-tag")].map((c) => c.textContent)).toEqual(["baseline", "sweep:lr/0.1"]);
    next("Create job");
    await screen.findByText("job page");
    expect(posted(calls)[0].tags).toEqual(["baseline", "sweep:lr/0.1"]);
  });

  it("shows the server's complaint about a tag at the field, naming the tag", async () => {
    const calls = api(() =>
      json(
        {
          title: "Unprocessable Entity",
          status: 422,
          detail: "the request is invalid",
          code: "invalid_request",
          errors: [{ loc: ["body", "tags", 1], msg: "a tag starts with a letter or a digit" }],
        },
        422,
      ),
    );
    renderPage();
    fireEvent.click(await screen.findByRole("button", { name: "Use param_server" }));
    fireEvent.change(screen.getByLabelText("Tags"), { target: { value: "ok, -bad" } });
    next("Next: roles");
    next("Next: review");
    next("Create job");
    const message = await screen.findByText(/starts with a letter or a digit/, { selector: "#job-tags-error" });
    expect(message).toHaveTextContent("“-bad”");
    expect(screen.getByLabelText("Tags")).toHaveAttribute("aria-invalid", "true");
    expect(posted(calls)[0].tags).toEqual(["ok", "-bad"]);
  });

  it("refuses more than 16 tags before sending", async () => {
    const calls = api();
    renderPage();
    fireEvent.click(await screen.findByRole("button", { name: "Use param_server" }));
    const many = Array.from({ length: 17 }, (_, i) => `t${i}`).join(",");
    fireEvent.change(screen.getByLabelText("Tags"), { target: { value: many } });
    next("Next: roles");
    expect(screen.getByRole("alert")).toHaveTextContent("at most 16 tags, not 17");
    expect(screen.getByLabelText("Tags")).toHaveAttribute("aria-invalid", "true");
    expect(posted(calls)).toHaveLength(0);
  });

  it("runs a tagged job again with its tags", async () => {
    const calls = api(undefined, job({ tags: ["baseline", "v2"] }));
    renderPage("/jobs/new?from=j1");
    expect(await screen.findByLabelText("Tags")).toHaveValue("baseline, v2");
    fireEvent.change(screen.getByLabelText("Tags"), { target: { value: "baseline, v2, lr-x2" } });
    next("Next: roles");
    next("Next: review");
    next("Create job");
    await screen.findByText("job page");
    expect(posted(calls)[0].tags).toEqual(["baseline", "v2", "lr-x2"]);
  });
});
