// What the console's browser scripts share: required environment, checks, Debian's headless
// chromium with a throw-away profile, sign-in and sign-out, and one JSON result line.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

export function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

export function check(condition, what) {
  if (!condition) throw new Error(`check failed: ${what}`);
}

// Runs `body({ context, page, consoleErrors })` in a fresh headless chromium and prints one JSON
// line: `{ ok: true, ...whatBodyReturned }`, or `{ ok: false, error, url }` (with a screenshot at
// E2E_SCREENSHOT when set) and exit code 1.
export async function withBrowser(body) {
  const userDataDir = mkdtempSync(join(tmpdir(), "modstream-e2e-"));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.E2E_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
    timeout: 60_000,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(20_000);
  const consoleErrors = [];
  page.on("console", (msg) => {
    if (msg.type() === "error") consoleErrors.push(`${msg.text()} @ ${msg.location().url}`);
  });
  page.on("pageerror", (err) => consoleErrors.push(String(err)));
  try {
    const result = await body({ context, page, consoleErrors });
    console.log(JSON.stringify({ ok: true, ...result, browser: context.browser()?.version() ?? null }));
  } catch (err) {
    if (process.env.E2E_SCREENSHOT) {
      await page.screenshot({ path: process.env.E2E_SCREENSHOT, fullPage: true }).catch(() => {});
    }
    console.log(JSON.stringify({ ok: false, error: String(err && err.stack ? err.stack : err), url: page.url() }));
    process.exitCode = 1;
  } finally {
    await context.close();
    rmSync(userDataDir, { recursive: true, force: true });
  }
}

// Signs in with `token` on the sign-in page and checks the header names `user`.
export async function signIn(page, base, token, user) {
  await page.goto(`${base}/console/login`);
  await page.fill("#token", token);
  await Promise.all([page.waitForURL("**/console/queue"), page.click("#login-form button[type=submit]")]);
  check((await page.textContent("#who")).includes(user), `the header names ${user}`);
}

export async function signOut(page) {
  await Promise.all([page.waitForURL("**/console/login"), page.click("header form[action='/console/logout'] button")]);
}
