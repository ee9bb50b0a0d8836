// A job's page in headless Chromium while its control plane is stopped and started again.
// Usage: BASE_URL=… ADMIN_TOKEN=… JOB_ID=… node e2e/restart.mjs, driven over stdin/stdout:
//   prints "STOP" once the job's page is open and live, then waits for a line on stdin (the
//   server has stopped); prints "DOWN" once the page shows the connection banner, then waits for
//   another line (the server is back); checks that the banner goes away, the live updates come
//   back and the job's cancellation shows without a reload.
// Prints one line per check and "N passed, N failed" at the end; exits non-zero on failure.
import { createInterface } from "node:readline";
import { checks, launchBrowser } from "./harness.mjs";

const BASE_URL = process.env.BASE_URL ?? "http://127.0.0.1:8000";
const ADMIN_TOKEN = process.env.ADMIN_TOKEN;
const JOB_ID = process.env.JOB_ID;
const TIMEOUT = Number(process.env.STEP_TIMEOUT_MS ?? 60000);
if (!ADMIN_TOKEN || !JOB_ID) throw new Error("ADMIN_TOKEN and JOB_ID are required");

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
/** The next line the driver writes to stdin; fails when it closes stdin first. */
async function nextLine() {
  const { value, done } = await lines.next();
  if (done) throw new Error("stdin closed");
  return value;
}

const browser = await launchBrowser();
const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });

// While the server is down (from just before it stops until the page shows it back), Chromium
// logs each request it could not connect for as "Failed to load resource:
// net::ERR_CONNECTION_REFUSED": those, and only then, are expected. The stopping server ends the
// job's event stream cleanly (it is not cut), so any other console error, or any at all outside
// the outage, is the dashboard's.
const REFUSED = "Failed to load resource: net::ERR_CONNECTION_REFUSED";
let outage = false;
let wentDown = false;
const consoleErrors = [];
const refused = [];
page.on("console", (m) => {
  if (m.type() !== "error") return;
  const url = m.location()?.url ?? "";
  if (outage && m.text() === REFUSED) refused.push(`${m.text()} ${url}`);
  else consoleErrors.push(`${outage ? "(server down) " : ""}${m.text()} ${url}`);
});
page.on("pageerror", (e) => consoleErrors.push(String(e)));

const { check, finish: close } = checks(page, "e2e-restart");

const banner = page.getByTestId("connection-lost");

async function finish() {
  await check("no console error but refused connections while the server was down", async () => {
    if (consoleErrors.length) throw new Error(consoleErrors.join("\n"));
    // what is let through is what Chromium logged: a stricter allowance would fail here
    if (wentDown && !refused.some((line) => line.startsWith(REFUSED))) throw new Error("no refused request was logged while the server was down");
    console.log(`     (while the server was down: ${refused.length} refused requests)`);
  });
  await close(browser);
}

let status = null;
const opened = await check("the job's page is open and follows the job live", async () => {
  await page.goto(`${BASE_URL}/`);
  await page.getByLabel("Access token").fill(ADMIN_TOKEN);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Jobs" }).waitFor();
  await page.goto(`${BASE_URL}/jobs/${JOB_ID}`);
  await page.locator('.live-indicator[data-live="open"]').waitFor({ timeout: TIMEOUT });
  status = await page.locator("h2 .chip[data-status]").getAttribute("data-status");
  if (!["queued", "pending"].includes(status)) throw new Error(`the job is ${status}`);
  if (await banner.count()) throw new Error("a connection banner while the server is up");
  // a reload would drop this mark: the page must show what follows without one
  await page.evaluate(() => {
    window.__sameDocument = true;
  });
});
if (!opened) await finish();

outage = true;
console.log("STOP");
await nextLine();

const noticed = await check("with the server stopped, the page says the connection is lost and keeps the job", async () => {
  await banner.waitFor({ timeout: TIMEOUT });
  await page.locator('.live-indicator[data-live="reconnecting"]').waitFor({ timeout: TIMEOUT });
  await page.locator(`h2 .chip[data-status="${status}"]`).waitFor({ timeout: 1000 });
});
console.log("DOWN");
if (!noticed) await finish();
wentDown = true;
await nextLine();

await check("with the server back, the banner goes and the live updates resume", async () => {
  await banner.waitFor({ state: "detached", timeout: TIMEOUT });
  outage = false;
  await page.locator('.live-indicator[data-live="open"]').waitFor({ timeout: TIMEOUT });
});
outage = false;

await check("the job's cancellation after the restart shows on the page without a reload", async () => {
  const res = await fetch(`${BASE_URL}/api/v1/jobs/${JOB_ID}/cancel`, {
    method: "POST",
    headers: { Authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  if (!res.ok) throw new Error(`cancel answered ${res.status}: ${await res.text()}`);
  await page.locator('h2 .chip[data-status="cancelled"]').waitFor({ timeout: TIMEOUT });
  if (!(await page.evaluate(() => window.__sameDocument === true))) throw new Error("the page was reloaded");
});

await finish();
