// What the end-to-end scripts share: the distribution's Chromium launched headless with the
// flags a closed network needs, and named checks that each print one line and are counted.
import { chromium } from "playwright-core";

/** Headless Chromium at `executablePath` (no background connections: this network is closed). */
export async function launchBrowser(executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium") {
  return chromium.launch({
    executablePath,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
}

/**
 * `check(name, fn)` runs one named check on `page`: prints "ok" or "FAIL" with its time, saves a
 * screenshot named after `prefix` on failure, and answers whether it passed; `finish(browser)`
 * prints "N passed, N failed" and exits non-zero when one failed.
 */
export function checks(page, prefix) {
  const results = [];
  async function check(name, fn) {
    const started = Date.now();
    try {
      await fn();
      results.push([name, true]);
      console.log(`ok   ${name} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
      return true;
    } catch (err) {
      results.push([name, false]);
      console.log(`FAIL ${name}: ${err?.stack ?? err}`);
      await page.screenshot({ path: `/tmp/${prefix}-failure-${results.length}.png`, fullPage: true }).catch(() => {});
      return false;
    }
  }
  async function finish(browser) {
    await browser.close();
    const passed = results.filter(([, ok]) => ok).length;
    const failed = results.length - passed;
    console.log(`${passed} passed, ${failed} failed`);
    process.exit(failed ? 1 : 0);
  }
  return { check, finish };
}
