// Page-load numbers of the dashboard in headless Chromium: a first visit (empty cache) and a
// second one (the browser's cache). Usage: BASE_URL=… [RUNS=5] node e2e/page-load.mjs
// Prints, for each visit, the medians over RUNS of bytes over the wire, bytes after
// decompression, requests answered from the network, and DOMContentLoaded and load times.
import { launchBrowser } from "./harness.mjs";

const BASE_URL = process.env.BASE_URL ?? "http://127.0.0.1:8000";
const RUNS = Number(process.env.RUNS ?? 5);
const browser = await launchBrowser();

async function visit(page) {
  await page.goto(`${BASE_URL}/`, { waitUntil: "load" });
  await page.getByLabel("Access token").waitFor();
  return page.evaluate(() => {
    const nav = performance.getEntriesByType("navigation")[0];
    const all = [nav, ...performance.getEntriesByType("resource")];
    return {
      wire: all.reduce((n, e) => n + e.transferSize, 0),
      decoded: all.reduce((n, e) => n + e.decodedBodySize, 0),
      fetched: all.filter((e) => e.transferSize > 0).length,
      requests: all.length,
      domContentLoaded: nav.domContentLoadedEventEnd,
      load: nav.loadEventEnd,
    };
  });
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const first = [];
const second = [];
for (let i = 0; i < RUNS; i++) {
  const context = await browser.newContext();
  const page = await context.newPage();
  first.push(await visit(page));
  second.push(await visit(page));
  await context.close();
}
await browser.close();

console.log("| visit | over the wire | decompressed | requests from the network | DOMContentLoaded | load |");
console.log("| --- | --- | --- | --- | --- | --- |");
for (const [name, runs] of [["first (empty cache)", first], ["second (cached)", second]]) {
  const m = (k) => median(runs.map((r) => r[k]));
  console.log(
    `| ${name} | ${(m("wire") / 1024).toFixed(1)} KiB | ${(m("decoded") / 1024).toFixed(1)} KiB | ${m("fetched")} of ${m("requests")} | ${m("domContentLoaded").toFixed(0)} ms | ${m("load").toFixed(0)} ms |`,
  );
}
