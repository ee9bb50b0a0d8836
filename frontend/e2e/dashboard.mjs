// End-to-end checks of the dashboard in headless Chromium against a running control plane
// and workers. Usage: BASE_URL=… ADMIN_TOKEN=… [CREATOR_TOKEN=… APPROVER_TOKEN=…] node e2e/dashboard.mjs.
// With the two party tokens (e.g. alice's and carol's) it also checks consent: a job of the
// creator's that waits for the approver, answered in the browser. SCREENSHOT, NEW_JOB_SCREENSHOT,
// COMPARE_SCREENSHOT and PARTIES_SCREENSHOT, each a path, save the job page, the New job form
// with a preset applied, the compare page and the parties page there.
// Prints one line per check and "N passed, N failed" at the end; exits non-zero on failure.
import { checks, launchBrowser } from "./harness.mjs";

const BASE_URL = process.env.BASE_URL ?? "http://127.0.0.1:8000";
const ADMIN_TOKEN = process.env.ADMIN_TOKEN;
const JOB_CONFIG = JSON.parse(process.env.JOB_CONFIG ?? "{}");
const LONG_CONFIG = JSON.parse(process.env.LONG_JOB_CONFIG ?? "{}");
const ALGORITHM = process.env.ALGORITHM ?? "ddp";
const SECOND_PARTY = process.env.SECOND_PARTY ?? "bob";
const TIMEOUT = Number(process.env.JOB_TIMEOUT_MS ?? 120000);
// the Quick demo runs of every algorithm, side by side
const QUICK_TIMEOUT = Number(process.env.QUICK_TIMEOUT_MS ?? 180000);
const CREATOR_TOKEN = process.env.CREATOR_TOKEN;
const APPROVER_TOKEN = process.env.APPROVER_TOKEN;
if (!ADMIN_TOKEN) throw new Error("ADMIN_TOKEN is required");

const browser = await launchBrowser();
const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
const external = [];
// errors the page itself logs or throws; a refused request (a 422 the form shows at its field)
// is logged by Chromium as "Failed to load resource" and is no error of the dashboard's
const consoleErrors = [];
page.on("console", (m) => {
  if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) consoleErrors.push(m.text());
});
page.on("pageerror", (e) => consoleErrors.push(String(e)));
page.on("request", (r) => {
  const url = new URL(r.url());
  if (!["127.0.0.1", "localhost"].includes(url.hostname) && url.protocol.startsWith("http")) external.push(r.url());
});

const { check, finish } = checks(page, "e2e");

async function fillConfig(config) {
  for (const [key, value] of Object.entries(config)) {
    const input = page.locator(`#cfg-${key}`);
    const tag = await input.evaluate((el) => el.tagName.toLowerCase());
    if (tag === "select") await input.selectOption(String(value));
    else if ((await input.getAttribute("type")) === "checkbox") await input.setChecked(Boolean(value));
    else await input.fill(typeof value === "object" ? JSON.stringify(value) : String(value));
    if (tag === "textarea") await input.blur();
  }
}

/** Walks the New job form: algorithm, name and config, one party per required role, review. */
async function createJob(name, config, tags = "") {
  await page.goto(`${BASE_URL}/jobs/new`);
  await page.getByRole("button", { name: `Use ${ALGORITHM}` }).click();
  await page.getByLabel("Job name").fill(name);
  if (tags) await page.locator("#job-tags").fill(tags);
  await fillConfig(config);
  await page.getByRole("button", { name: "Next: roles" }).click();
  if (SECOND_PARTY) {
    // a second party in the first role, so the job spans two parties
    const role = (await page.locator("fieldset legend strong").first().textContent()) ?? "";
    await page.getByRole("button", { name: `Add ${role} party` }).click();
    await page.getByLabel(`${role} party 2`).selectOption(SECOND_PARTY);
  }
  await page.getByRole("button", { name: "Next: review" }).click();
  await page.getByRole("button", { name: "Create job" }).click();
}

async function waitForStatus(status, timeout = TIMEOUT) {
  await page.locator(`h2 .chip[data-status="${status}"]`).waitFor({ timeout });
}

await check("sign in with the admin token", async () => {
  await page.goto(`${BASE_URL}/`);
  await page.getByLabel("Access token").fill(ADMIN_TOKEN);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Jobs" }).waitFor();
});

await check("a bad configuration shows the server's validation error", async () => {
  await page.goto(`${BASE_URL}/jobs/new`);
  await page.getByRole("button", { name: `Use ${ALGORITHM}` }).click();
  await page.getByLabel("Job name").fill("e2e-invalid");
  await page.locator("#cfg-steps").fill("-5");
  await page.getByRole("button", { name: "Next: roles" }).click();
  await page.getByRole("button", { name: "Next: review" }).click();
  await page.getByRole("button", { name: "Create job" }).click();
  await page.locator("#cfg-steps-error").waitFor();
  const text = await page.locator("#cfg-steps-error").textContent();
  if (!/greater than|>=|at least/i.test(text ?? "")) throw new Error(`unexpected message: ${text}`);
});

let runUrl = null;
await check("create a job through the form; it succeeds with points on the loss chart", async () => {
  await createJob("e2e-run", JOB_CONFIG, "e2e, two-party");
  await page.waitForURL(/\/jobs\/[0-9a-f-]+$/);
  runUrl = page.url();
  await waitForStatus("succeeded");
  const chart = page.locator('figure[aria-label="loss chart"]');
  await chart.waitFor();
  await page.waitForFunction(() => Number(document.querySelector('figure[aria-label="loss chart"]')?.getAttribute("data-points") ?? 0) > 0);
  if (process.env.SCREENSHOT) await page.screenshot({ path: process.env.SCREENSHOT, fullPage: true });
});

await check("the job page shows the overview, final metrics, roles and the configuration's changes", async () => {
  await page.goto(runUrl);
  await page.getByRole("table", { name: "Final metrics" }).locator('tr[data-metric="loss"]').waitFor();
  const roles = page.getByRole("table", { name: "Roles" });
  const parties = (await apiCall(ADMIN_TOKEN, "GET", `/jobs/${runUrl.split("/").pop()}`)).parties;
  for (const party of parties) await roles.locator(`tr[data-party="${party}"]`).first().waitFor();
  const steps = page.getByRole("region", { name: "Configuration" }).locator('li[data-path="steps"]');
  if (!(await steps.getAttribute("class"))?.includes("changed")) throw new Error("steps not marked as changed");
  if (await page.getByRole("button", { name: "Retry" }).count()) throw new Error("a succeeded job offers Retry");
});

await check("the job page's artifacts: checkpoints by step, each rank's file downloads as recorded", async () => {
  await page.goto(runUrl);
  const artifacts = page.getByRole("region", { name: "Artifacts" });
  const button = artifacts.getByRole("button", { name: /^Download checkpoint step \d+ rank 0$/ }).first();
  await button.waitFor();
  const [download] = await Promise.all([page.waitForEvent("download"), button.click()]);
  const saved = await download.path();
  const bytes = (await import("node:fs")).readFileSync(saved);
  const sha = (await import("node:crypto")).createHash("sha256").update(bytes).digest("hex");
  const jobId = runUrl.split("/").pop();
  const recorded = (await apiCall(ADMIN_TOKEN, "GET", `/jobs/${jobId}/checkpoints`)).filter((c) => c.rank === 0).map((c) => c.sha256);
  if (!recorded.includes(sha)) throw new Error(`downloaded ${bytes.length} bytes matching no recorded checkpoint`);
  if (!/-checkpoint-step\d+-rank0\.pt$/.test(download.suggestedFilename())) throw new Error(`saved as ${download.suggestedFilename()}`);
});

await check("tags: shown on the job and in the list, where a tag filters the jobs", async () => {
  await page.goto(runUrl);
  await page.getByRole("group", { name: "Tags" }).getByRole("link", { name: "two-party" }).click();
  await page.waitForURL(/\/jobs\?.*tag=two-party/);
  const jobs = page.getByRole("table", { name: "Jobs" });
  await jobs.getByRole("row", { name: /e2e-run/ }).first().waitFor();
  const names = await jobs.locator("tbody tr").allTextContents();
  if (names.some((n) => !n.includes("e2e-run"))) throw new Error(`the tag filter kept ${names.join(" / ")}`);
});

await check("run again with changes: the form filled from the job; the copy is created with the edit", async () => {
  await page.goto(runUrl);
  await page.getByRole("link", { name: "Run again with changes" }).click();
  const name = page.getByLabel("Job name");
  await name.waitFor();
  if ((await name.inputValue()) !== "e2e-run (2)") throw new Error(`name ${await name.inputValue()}`);
  if ((await page.locator("#cfg-steps").inputValue()) !== String(JOB_CONFIG.steps ?? 200)) throw new Error("steps not copied");
  await page.locator("#cfg-steps").fill("12");
  await page.getByRole("button", { name: "Next: roles" }).click();
  if (SECOND_PARTY && (await page.locator("fieldset select").count()) < 2) throw new Error("assignments not copied");
  await page.getByRole("button", { name: "Next: review" }).click();
  const created = page.waitForResponse((r) => r.url().endsWith("/api/v1/jobs") && r.request().method() === "POST");
  await page.getByRole("button", { name: "Create job" }).click();
  const response = await created;
  if (response.status() !== 201) throw new Error(`POST /jobs answered ${response.status()}`);
  const job = await response.json();
  await apiCall(ADMIN_TOKEN, "POST", `/jobs/${job.id}/cancel`).catch(() => {});
  if (job.config.steps !== 12 || job.config.log_interval !== JOB_CONFIG.log_interval) throw new Error(`config ${JSON.stringify(job.config)}`);
  await page.waitForURL(new RegExp(`/jobs/${job.id}$`));
  await page.getByRole("region", { name: "Configuration" }).locator('li.changed[data-path="steps"]').getByText("12").waitFor();
});

await check("a nested field's error is shown at that field", async () => {
  await page.goto(`${BASE_URL}/jobs/new`);
  await page.getByRole("button", { name: "Use param_server" }).click();
  await page.getByLabel("Job name").fill("e2e-nested-invalid");
  await page.locator("#cfg-data-vocab").fill("1");
  await page.getByRole("button", { name: "Next: roles" }).click();
  await page.getByRole("button", { name: "Next: review" }).click();
  await page.getByRole("button", { name: "Create job" }).click();
  const error = page.locator("#cfg-data-vocab-error");
  await error.waitFor();
  if (!/greater than or equal to 2/.test((await error.textContent()) ?? "")) throw new Error(await error.textContent());
});

/**
 * On the form's roles step, keeps each role's default party where that party has a worker to
 * run it, and otherwise picks one that has, as a user would: not one the same role already has,
 * nor one that a role excluding it has (mpc_mixed's dealer is never a compute party).
 */
const EXCLUDES = { dealer: ["compute"], compute: ["dealer"] };
/** The Quick demo job of each algorithm, by name: the split_nn and mpc_mixed checks read theirs. */
const quick = {};
async function pickRunnableParties(runnable) {
  const rows = [];
  for (const fieldset of await page.locator("fieldset:has(legend strong)").all()) {
    const role = ((await fieldset.locator("legend strong").textContent()) ?? "").trim();
    for (const select of await fieldset.getByLabel(new RegExp(`^${role} party \\d+$`)).all()) {
      rows.push({ role, select, party: await select.inputValue() });
    }
  }
  for (const row of rows) {
    if (runnable.includes(row.party)) continue;
    const others = rows.filter((r) => r !== row && (r.role === row.role || EXCLUDES[row.role]?.includes(r.role)));
    // a party of its own where one is free, as a user would give each role
    const party = runnable.find((p) => !rows.some((r) => r !== row && r.party === p)) ?? runnable.find((p) => !others.some((r) => r.party === p));
    if (!party) throw new Error(`no party with a worker for ${row.role}`);
    await row.select.selectOption(party);
    row.party = party;
  }
  return rows.map((r) => `${r.role}=${r.party}`);
}

await check("every algorithm created through the form with its Quick demo preset runs to success", async () => {
  const algorithms = await apiCall(ADMIN_TOKEN, "GET", "/algorithms");
  const runnable = [...new Set((await apiCall(ADMIN_TOKEN, "GET", "/workers")).data.filter((w) => w.online).map((w) => w.party))].sort();
  const created = [];
  const refused = [];
  for (const { name } of algorithms) {
    await page.goto(`${BASE_URL}/jobs/new`);
    await page.getByRole("button", { name: `Use ${name}` }).click();
    await page.getByLabel("Job name").fill(`e2e-quick-${name}`);
    await page.getByRole("group", { name: "Presets" }).getByRole("button", { name: "Quick demo" }).click();
    if (name === ALGORITHM && process.env.NEW_JOB_SCREENSHOT) await page.screenshot({ path: process.env.NEW_JOB_SCREENSHOT, fullPage: true });
    await page.getByRole("button", { name: "Next: roles" }).click();
    const roles = await pickRunnableParties(runnable);
    await page.getByRole("button", { name: "Next: review" }).click();
    // the review lists what differs from the defaults: the preset's values
    const changed = JSON.parse((await page.locator("section.panel pre").first().textContent()) ?? "{}");
    if (!Object.keys(changed).length) throw new Error(`${name}: the Quick demo preset changed nothing`);
    const response = page.waitForResponse((r) => r.url().endsWith("/api/v1/jobs") && r.request().method() === "POST");
    await page.getByRole("button", { name: "Create job" }).click();
    const answer = await response;
    const body = await answer.json();
    if (answer.status() !== 201) {
      refused.push(`${name}: ${answer.status()} ${JSON.stringify(body.errors ?? body.detail)}`);
      continue;
    }
    created.push({ name, id: body.id, roles });
    quick[name] = body.id;
    await page.waitForURL(new RegExp(`/jobs/${body.id}$`));
  }
  if (refused.length) throw new Error(refused.join("; "));
  // all at once: the workers run them side by side
  const ends = await Promise.allSettled(created.map(({ id }) => waitForJob(id, ["succeeded", "failed", "cancelled", "rejected"], QUICK_TIMEOUT)));
  const failures = ends.flatMap((end, i) => {
    const { name, roles } = created[i];
    if (end.status === "rejected") return [`${name} (${roles.join(", ")}): ${end.reason?.message ?? end.reason}`];
    const job = end.value;
    return job.status === "succeeded" ? [] : [`${name} (${roles.join(", ")}) ${job.status}: ${job.status_reason}`];
  });
  if (failures.length) throw new Error(failures.join("\n"));
  for (const [i, { name, roles }] of created.entries()) {
    const job = ends[i].value;
    const seconds = (from, to) => ((Date.parse(to) - Date.parse(from)) / 1000).toFixed(1);
    console.log(`     ${name} (${roles.join(", ")}): ${seconds(job.created_at, job.started_at)} s to start, ${seconds(job.started_at, job.finished_at)} s to run`);
  }
});

await check("cancel a running job", async () => {
  await createJob("e2e-cancel", LONG_CONFIG);
  await page.waitForURL(/\/jobs\/[0-9a-f-]+$/);
  await waitForStatus("running");
  const jobUrl = page.url();
  // cancelled while training: a rank stopped while still starting up can reach the end of the
  // stop's grace, and be killed, before it says that it stopped (its task ends cancelled alike)
  await waitForLoss(jobUrl.split("/").pop());
  // the workers page shows the running job on the workers that host it
  await page.getByRole("link", { name: "Parties & workers" }).click();
  await page.getByRole("link", { name: "e2e-cancel" }).first().waitFor();
  if (process.env.PARTIES_SCREENSHOT) await page.screenshot({ path: process.env.PARTIES_SCREENSHOT, fullPage: true });
  await page.goto(jobUrl);
  await page.getByRole("button", { name: "Cancel" }).click();
  await waitForStatus("cancelled", 30000);
  // each rank says it stopped, in one line, without a traceback of the broken collective
  const logs = page.getByRole("region", { name: "Logs" });
  await logs.getByText("rank 0 stopped: the job was cancelled").waitFor({ timeout: 15000 });
  if (((await logs.locator(".logs").textContent()) ?? "").includes("Traceback")) throw new Error("a traceback in a cancel's logs");
});

/** Waits through the API until a job's ranks have reported a loss. */
async function waitForLoss(id) {
  await pollApi(`/jobs/${id}/metrics?names=loss`, ({ series }) => series.some((s) => s.points.length), () => `job ${id} reported no loss`);
}

/** Waits through the API until a job reaches one of `statuses`; returns the job. */
async function waitForJob(id, statuses, timeout = TIMEOUT) {
  return pollApi(`/jobs/${id}`, (job) => statuses.includes(job.status), (job) => `job ${id} is ${job.status}: ${job.status_reason}`, timeout);
}

/** Reads `path` as the admin every half second until `done(answer)`; returns that answer, or
 * fails with `failure(answer)` once `timeout` ms have passed. */
async function pollApi(path, done, failure, timeout = TIMEOUT) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const answer = await apiCall(ADMIN_TOKEN, "GET", path);
    if (done(answer)) return answer;
    if (Date.now() > deadline) throw new Error(failure(answer));
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** "party · role rN", as the logs name each rank of a job's latest attempt. */
function rankNames(job) {
  const attempt = job.attempts[job.attempts.length - 1];
  return attempt.tasks.flatMap((t) => t.ranks.map((r) => ({ party: t.party, role: r.role, rank: r.rank, name: `${t.party} · ${r.role} r${r.rank}` })));
}

/** The Quick demo job of `algorithm` from the check above, once it has succeeded. */
async function quickJob(algorithm) {
  if (!quick[algorithm]) throw new Error(`no ${algorithm} job from the Quick demo check`);
  const job = await waitForJob(quick[algorithm], ["succeeded", "failed", "cancelled"]);
  if (job.status !== "succeeded") throw new Error(`${algorithm} ${job.status}: ${job.status_reason}`);
  return job;
}

let splitId = null;
await check("split_nn's logs hold every rank's lines, named by party and role, with filters; bytes between parties; a wall-clock axis", async () => {
  const job = await quickJob("split_nn");
  splitId = job.id;
  const ranks = rankNames(job);
  const feature = ranks.find((r) => r.role === "feature").party;
  const label = ranks.find((r) => r.role === "label").party;
  if (feature === label) throw new Error(`one party holds both roles: ${feature}`);
  await page.goto(`${BASE_URL}/jobs/${splitId}`);
  const logs = page.getByRole("region", { name: "Logs" });
  await logs.getByText(/rank 0 finished in/).waitFor();
  await logs.getByText(`progress: step ${job.config.steps}/${job.config.steps}`).first().waitFor();
  const text = (await logs.locator(".logs").textContent()) ?? "";
  for (const { name } of ranks) if (!text.includes(name)) throw new Error(`no line of ${name}`);
  await logs.getByLabel("Party").selectOption(feature);
  const lines = await logs.locator(".log-line .log-meta").allTextContents();
  if (!lines.length || lines.some((l) => !l.includes(`${feature} · feature`))) throw new Error(`party filter kept ${lines.join(" / ")}`);
  await logs.getByLabel("Level").selectOption("error");
  await logs.getByText("No line matches the filters.").waitFor();
  const matrix = page.getByRole("region", { name: "Bytes between parties" });
  const cell = matrix.locator(`td[data-from="${feature}"][data-to="${label}"]`);
  if (!/\d/.test((await cell.textContent()) ?? "")) throw new Error(`matrix cell ${await cell.textContent()}`);
  const legendCase = await page.locator(".u-legend th").first().evaluate((el) => getComputedStyle(el).textTransform);
  if (legendCase !== "none") throw new Error(`chart legends are ${legendCase}`);
  // over wall-clock time, the counters are rates per second
  await page.getByRole("group", { name: "Chart options" }).getByLabel("x axis").selectOption("time");
  await page.locator(".u-title", { hasText: "bytes_sent per second" }).waitFor();
});

await check("mpc_mixed's logs hold every rank's lines, the dealer's included, and the bytes the dealer sent", async () => {
  const job = await quickJob("mpc_mixed");
  const ranks = rankNames(job);
  const dealer = ranks.find((r) => r.role === "dealer").party;
  const compute = ranks.filter((r) => r.role === "compute").map((r) => r.party);
  if (compute.includes(dealer)) throw new Error(`the dealer ${dealer} computes`);
  await page.goto(`${BASE_URL}/jobs/${job.id}`);
  const logs = page.getByRole("region", { name: "Logs" });
  await logs.getByText(new RegExp(`rank ${ranks.find((r) => r.role === "dealer").rank} finished in`)).waitFor();
  const text = (await logs.locator(".logs").textContent()) ?? "";
  for (const { name } of ranks) if (!text.includes(name)) throw new Error(`no line of ${name}`);
  if (!/progress: step \d+/.test(text)) throw new Error("no progress line");
  // the dealer reports no traffic itself: the worker's counters show what it sent (its bulk to
  // one compute party: the other needs little)
  const matrix = page.getByRole("region", { name: "Bytes between parties" });
  const sent = [];
  for (const party of compute) sent.push((await matrix.locator(`td[data-from="${dealer}"][data-to="${party}"]`).textContent()) ?? "");
  if (!sent.some((text) => /[KMG]iB/.test(text))) throw new Error(`the dealer sent ${compute.map((p, i) => `${p} ${sent[i]}`).join(", ")}`);
});

await check("compare two jobs: overlay, final metrics and configuration differences; the jobs list shows duration and result", async () => {
  const runId = runUrl.split("/").pop();
  await page.goto(`${BASE_URL}/compare?job=${runId}&job=${splitId}&metric=loss`);
  await page.waitForFunction(() => Number(document.querySelector('figure[aria-label="loss by job chart"]')?.getAttribute("data-points") ?? 0) > 0);
  await page.getByRole("region", { name: "Final metrics" }).getByRole("row", { name: /^loss/ }).waitFor();
  await page.getByRole("region", { name: "Configuration differences" }).getByRole("row", { name: /^algorithm/ }).waitFor();
  if (process.env.COMPARE_SCREENSHOT && quick.ddp) {
    // for the picture, two runs of one algorithm: the two-party run and the Quick demo's
    await page.goto(`${BASE_URL}/compare?job=${runId}&job=${quick.ddp}&metric=loss`);
    await page.waitForFunction(() => Number(document.querySelector('figure[aria-label="loss by job chart"]')?.getAttribute("data-points") ?? 0) > 0);
    await page.getByRole("region", { name: "Final metrics" }).getByRole("row", { name: /^loss/ }).waitFor();
    await page.screenshot({ path: process.env.COMPARE_SCREENSHOT, fullPage: true });
  }
  await page.goto(`${BASE_URL}/jobs`);
  const row = page.getByRole("table", { name: "Jobs" }).getByRole("row", { name: /e2e-quick-split_nn/ });
  // split_nn's result is its accuracy
  await row.getByText("accuracy", { exact: true }).waitFor();
  if (!/\d+ s/.test((await row.getByTestId("duration").textContent()) ?? "")) throw new Error("no duration");
});

await check("the dashboard's assets are served compressed and cached for good", async () => {
  const index = await fetch(`${BASE_URL}/`, { headers: { "Accept-Encoding": "gzip" } });
  const html = await index.text();
  if (index.headers.get("cache-control") !== "no-cache") throw new Error(`index.html: ${index.headers.get("cache-control")}`);
  const script = /src="([^"]+\.js)"/.exec(html)?.[1];
  const asset = await fetch(`${BASE_URL}${script}`, { headers: { "Accept-Encoding": "gzip" } });
  if (asset.headers.get("content-encoding") !== "gzip") throw new Error(`${script} sent without compression`);
  if (!asset.headers.get("cache-control")?.includes("immutable")) throw new Error(`${script}: ${asset.headers.get("cache-control")}`);
});

/** A call to the control plane's API with a given token; throws the problem's detail on failure. */
async function apiCall(token, method, path, body) {
  const res = await fetch(`${BASE_URL}/api/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = res.status === 204 ? null : await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${data?.detail ?? JSON.stringify(data)}`);
  return data;
}

/** As the creator, through the API: a job naming the creator and the approver, one per role row. */
async function createJobNeedingApproval(name) {
  const creator = (await apiCall(CREATOR_TOKEN, "GET", "/me")).name;
  const approver = (await apiCall(APPROVER_TOKEN, "GET", "/me")).name;
  const algorithm = (await apiCall(ADMIN_TOKEN, "GET", "/algorithms")).find((a) => a.name === ALGORITHM);
  const role = algorithm.roles[0].name;
  const job = await apiCall(CREATOR_TOKEN, "POST", "/jobs", {
    name,
    algorithm: ALGORITHM,
    config: JOB_CONFIG,
    assignments: [creator, approver].map((party) => ({ party, role })),
  });
  if (job.status !== "pending" || !job.waiting_for.includes(approver)) {
    throw new Error(`expected ${name} pending on ${approver}: ${job.status} ${job.status_reason}`);
  }
  return { job, approver };
}

async function signInAs(token) {
  await page.goto(`${BASE_URL}/jobs`);
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByLabel("Access token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Jobs" }).waitFor();
}

if (CREATOR_TOKEN && APPROVER_TOKEN) {
  const asked = [];
  const approver = (await apiCall(APPROVER_TOKEN, "GET", "/me")).name;
  const policy = await apiCall(APPROVER_TOKEN, "GET", `/parties/${approver}/policy`);
  await check("a party approves a job waiting for it from its list; the job leaves pending", async () => {
    // the demo parties approve each other unasked: the approver now wants to be asked
    await apiCall(APPROVER_TOKEN, "PUT", `/parties/${approver}/policy`, { ...policy, auto_approve_from: [] });
    const { job } = await createJobNeedingApproval("e2e-consent");
    asked.push(job.id);
    await signInAs(APPROVER_TOKEN);
    const list = page.getByRole("table", { name: "Waiting for your approval" });
    await list.getByRole("link", { name: "e2e-consent" }).waitFor();
    await page.getByTestId("awaiting-badge").waitFor();
    await list.getByRole("button", { name: "Approve e2e-consent" }).click();
    await page.getByRole("status").filter({ hasText: "Approved e2e-consent" }).waitFor();
    await list.getByRole("link", { name: "e2e-consent" }).waitFor({ state: "detached" });
    await page.goto(`${BASE_URL}/jobs/${job.id}`);
    await page.locator(`h2 .chip:not([data-status="pending"])`).waitFor();
    const row = page.getByRole("table", { name: "Approvals by party" }).locator(`tr[data-party="${approver}"]`);
    await row.getByText("approved").waitFor();
  });

  await check("a party rejects a job on its page with a reason; the job ends rejected", async () => {
    const { job } = await createJobNeedingApproval("e2e-refused");
    asked.push(job.id);
    await page.goto(`${BASE_URL}/jobs/${job.id}`);
    await page.getByText("Your approval is needed").waitFor();
    await page.getByRole("button", { name: "Reject e2e-refused" }).click();
    await page.getByLabel("Reason for rejecting e2e-refused").fill("not with this data");
    await page.getByRole("button", { name: "Confirm reject" }).click();
    await waitForStatus("rejected", 30000);
    await page.getByText(`rejected by ${approver}: not with this data`).first().waitFor();
  });

  // the approved job may wait for a worker the approver lacks: stop it, give the approver its
  // policy back, and sign back in as the admin
  for (const id of asked) await apiCall(ADMIN_TOKEN, "POST", `/jobs/${id}/cancel`).catch(() => {});
  await apiCall(APPROVER_TOKEN, "PUT", `/parties/${approver}/policy`, policy).catch(() => {});
  await signInAs(ADMIN_TOKEN).catch(() => {});
}

await check("the dashboard logged no console error", async () => {
  if (consoleErrors.length) throw new Error(consoleErrors.join("\n"));
});

await check("the dashboard made no external network request", async () => {
  if (external.length) throw new Error(`external requests: ${external.join(", ")}`);
});

await finish(browser);
