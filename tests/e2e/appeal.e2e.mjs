// Drives an appeal through the review console in Debian's headless chromium: the moderator whose
// decision is appealed does not see it in the appeals queue and is refused its claim
// (own_decision, on the error page); a second moderator claims it from the appeals queue, reads
// the statement (hostile markup, which must arrive as text and run nothing) and the decision
// under appeal, and reverses it with a reason. Prints one JSON line.
//
// Environment: E2E_BASE_URL, E2E_APPEAL_ITEM (the appeal's item id), E2E_DECIDER and
// E2E_DECIDER_TOKEN (who made the appealed decision), E2E_HANDLER and E2E_HANDLER_TOKEN (the
// second moderator), E2E_REASON (the outcome's reason); optional E2E_CHROMIUM, E2E_SCREENSHOT.
import { check, env, signIn, signOut, withBrowser } from "./harness.mjs";

const base = env("E2E_BASE_URL");
const appealItem = env("E2E_APPEAL_ITEM");
const decider = env("E2E_DECIDER");
const handler = env("E2E_HANDLER");
const reason = env("E2E_REASON");

const listed = (page) =>
  page.$$eval("#queue tbody tr[data-item-id]", (trs) => trs.map((tr) => tr.dataset.itemId));

await withBrowser(async ({ page, consoleErrors }) => {
  // The decider: the appeal is not in their appeals queue, and its claim is refused.
  await signIn(page, base, env("E2E_DECIDER_TOKEN"), decider);
  await page.goto(`${base}/console/queue?queue=appeals`);
  const deciderListed = await listed(page);
  check(!deciderListed.includes(appealItem), "the decider's appeals queue leaves the appeal out");
  await page.goto(`${base}/console/items/${appealItem}`);
  check(await page.isVisible("#statement-hidden"), "no statement before a claim");
  check((await page.textContent("#original-moderator")).trim() === decider, "the page names the decider");
  await Promise.all([page.waitForLoadState(), page.click("#claim")]);
  const refusal = {
    code: (await page.textContent("#error-code")).trim(),
    detail: (await page.textContent("#error-detail")).trim(),
  };
  check(refusal.code === "own_decision", `the decider is refused with own_decision, got ${refusal.code}`);
  // The browser logs the refused request's 403 (and the first page's missing favicon) as errors;
  // nothing else may be logged.
  const refusedLogs = consoleErrors.splice(0);
  const expected = (line) => line.includes("status of 403") || line.includes("/favicon.ico");
  check(refusedLogs.every(expected), `only the 403 is logged: ${refusedLogs.join(" | ")}`);
  await page.goto(`${base}/console/queue`);
  await signOut(page);

  // The second moderator claims the appeal from the appeals queue with "n".
  await signIn(page, base, env("E2E_HANDLER_TOKEN"), handler);
  await page.goto(`${base}/console/queue?queue=appeals`);
  const handlerListed = await listed(page);
  check(handlerListed.includes(appealItem), "the appeal is in the second moderator's appeals queue");
  await page.locator("body").click({ position: { x: 2, y: 2 } });
  await Promise.all([page.waitForURL(`**/console/items/${appealItem}`), page.keyboard.press("n")]);

  // The statement is text: its markup made no element and ran nothing.
  const statement = page.locator("#appeal-statement");
  const shownStatement = await statement.textContent();
  const injected = await statement.evaluate((el) => el.querySelectorAll("*").length);
  check(injected === 0, `the statement made ${injected} elements`);
  const ran = await page.evaluate(() => window.__appealXss ?? null);
  check(ran === null, `the statement's script ran (${ran})`);

  const original = {
    moderator: (await page.textContent("#original-moderator")).trim(),
    action: (await page.textContent("#original-action")).trim(),
    reason: (await page.textContent("#original-reason")).trim(),
  };
  check((await page.locator("#decide-form").count()) === 0, "no action buttons on an appeal");

  // Reverse, with a reason; a click with the reason empty is held back by the form.
  await page.click("#appeal-reversed");
  check(new URL(page.url()).pathname === `/console/items/${appealItem}`, "no outcome without a reason");
  await page.fill("#reason", reason);
  await Promise.all([page.waitForURL("**/console/audit?item_id=*"), page.click("#appeal-reversed")]);
  const audit = await page.$$eval("#audit tbody tr[data-action]", (trs) =>
    trs.map((tr) => ({
      action: tr.dataset.action,
      actor: tr.children[3].textContent.trim(),
      reason: tr.children[5].textContent.trim(),
      item: tr.children[2].textContent.trim(),
    })));
  const row = audit.find((r) => r.action === "reversed");
  check(row && row.actor === handler && row.reason === reason && row.item === appealItem, "audit row for the outcome");

  await page.goto(`${base}/console/items/${appealItem}`);
  const outcome = (await page.textContent("#appeal-outcome")).trim();
  check(consoleErrors.length === 0, `no browser console errors: ${consoleErrors.join(" | ")}`);
  return { refusal, deciderListed, handlerListed, shownStatement, original, audit, outcome };
});
