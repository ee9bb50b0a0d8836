// End-to-end checks of the dashboard in headless Chromium against a running control plane
// and worker. Usage: BASE_URL=… ADMIN_TOKEN=… [SCREENSHOT=path] node e2e/dashboard.mjs
// Prints one line per check and "N passed, N failed" at the end; exits non-zero on failure.
import { chromium } from "playwright-core";

const BASE_URL = process.env.BASE_URL ?? "http://127.0.0.1:8000";
const ADMIN_TOKEN = process.env.ADMIN_TOKEN;
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const JOB_CONFIG = JSON.parse(process.env.JOB_CONFIG ?? "{}");
const LONG_CONFIG = JSON.parse(process.env.LONG_JOB_CONFIG ?? "{}");
const ALGORITHM = process.env.ALGORITHM ?? "ddp";
const SECOND_PARTY = process.env.SECOND_PARTY ?? "bob";
const TIMEOUT = Number(process.env.JOB_TIMEOUT_MS ?? 120000);
if (!ADMIN_TOKEN) throw new Error("ADMIN_TOKEN is required");

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
});
const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
const external = [];
page.on("request", (r) => {
  const url = new URL(r.url());
  if (!["127.0.0.1", "localhost"].includes(url.hostname) && url.protocol.startsWith("http")) external.push(r.url());
});

const results = [];
async function check(name, fn) {
  try {
    await fn();
    results.push([name, true]);
    console.log(`ok   ${name}`);
  } catch (err) {
    results.push([name, false]);
    console.log(`FAIL ${name}: ${err?.stack ?? err}`);
    await page.screenshot({ path: `/tmp/e2e-failure-${results.length}.png`, fullPage: true }).catch(() => {});
  }
}

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
async function createJob(name, config) {
  await page.goto(`${BASE_URL}/jobs/new`);
  await page.getByRole("button", { name: `Use ${ALGORITHM}` }).click();
  await page.getByLabel("Job name").fill(name);
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

await check("create a job through the form; it succeeds with points on the loss chart", async () => {
  await createJob("e2e-run", JOB_CONFIG);
  await page.waitForURL(/\/jobs\/[0-9a-f-]+$/);
  await waitForStatus("succeeded");
  const chart = page.locator('figure[aria-label="loss chart"]');
  await chart.waitFor();
  await page.waitForFunction(() => Number(document.querySelector('figure[aria-label="loss chart"]')?.getAttribute("data-points") ?? 0) > 0);
  if (process.env.SCREENSHOT) await page.screenshot({ path: process.env.SCREENSHOT, fullPage: true });
});

await check("cancel a running job", async () => {
  await createJob("e2e-cancel", LONG_CONFIG);
  await page.waitForURL(/\/jobs\/[0-9a-f-]+$/);
  await waitForStatus("running");
  const jobUrl = page.url();
  // the workers page shows the running job on the workers that host it
  await page.getByRole("link", { name: "Parties & workers" }).click();
  await page.getByRole("link", { name: "e2e-cancel" }).first().waitFor();
  if (process.env.PARTIES_SCREENSHOT) await page.screenshot({ path: process.env.PARTIES_SCREENSHOT, fullPage: true });
  await page.goto(jobUrl);
  await page.getByRole("button", { name: "Cancel" }).click();
  await waitForStatus("cancelled", 30000);
});

await check("the dashboard made no external network request", async () => {
  if (external.length) throw new Error(`external requests: ${external.join(", ")}`);
});

await browser.close();
const passed = results.filter(([, ok]) => ok).length;
const failed = results.length - passed;
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
