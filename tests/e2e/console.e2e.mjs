// Drives the review console in Debian's headless chromium: sign in, claim the top item, reveal
// the blurred text and its marked rule hits, read the conversation around it, decide with a
// keyboard shortcut, read the audit row. Prints one JSON line.
//
// Environment: E2E_BASE_URL, E2E_TOKEN, E2E_REASON, E2E_USER; optional E2E_CHROMIUM
// (default /usr/bin/chromium) and E2E_SCREENSHOT (a path written on failure).
import { check, env, withBrowser } from "./harness.mjs";

const base = env("E2E_BASE_URL");
const token = env("E2E_TOKEN");
const reason = env("E2E_REASON");
const user = env("E2E_USER");

await withBrowser(async ({ context, page, consoleErrors }) => {
  // Anonymous visitors are sent to the sign-in page.
  await page.goto(`${base}/console/queue`);
  check(new URL(page.url()).pathname === "/console/login", `redirected to sign in, at ${page.url()}`);

  // A wrong token is refused.
  await page.fill("#token", "msr_wrong");
  await Promise.all([page.waitForLoadState(), page.click("#login-form button[type=submit]")]);
  check(await page.isVisible("#login-error"), "a wrong token shows an error");
  consoleErrors.length = 0; // the refused sign-in's 401 is logged by the browser as an error

  // Sign in.
  await page.fill("#token", token);
  await Promise.all([page.waitForURL("**/console/queue"), page.click("#login-form button[type=submit]")]);
  check((await page.textContent("#who")).includes(user), "the header names the signed-in user");
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === "modstream_session");
  check(session && session.httpOnly && session.sameSite === "Strict", "session cookie is HttpOnly, SameSite=Strict");
  const rows = await page.$$eval("#queue tbody tr[data-item-id]", (trs) => trs.map((tr) => tr.dataset.itemId));
  check(rows.length > 0, "the queue lists the seeded escalation");

  // Claim the top item with the keyboard shortcut "n".
  await page.locator("body").click({ position: { x: 2, y: 2 } });
  await Promise.all([page.waitForURL("**/console/items/*"), page.keyboard.press("n")]);
  const itemId = new URL(page.url()).pathname.split("/").pop();
  check(itemId === rows[0], `claimed the top item ${rows[0]}, got ${itemId}`);

  // The message text is blurred until clicked.
  const text = page.locator("#message-text");
  const blurBefore = await text.evaluate((el) => getComputedStyle(el).filter);
  check(blurBefore.includes("blur"), `text blurred by default (filter: ${blurBefore})`);
  await text.click();
  // The reveal animates (CSS transition): wait for it to settle.
  await page.waitForFunction(() => getComputedStyle(document.getElementById("message-text")).filter === "none");
  check(await text.evaluate((el) => el.classList.contains("revealed")), "text revealed on click");
  const shownText = (await text.textContent()).trim();

  // What the rules matched is marked, visibly, inside the revealed text.
  const marks = text.locator("mark.hit");
  const marked = await marks.allTextContents();
  check(marked.length > 0, "the rule hit is marked in the text");
  const markBackground = await marks.first().evaluate((el) => getComputedStyle(el).backgroundColor);
  check(markBackground !== "rgba(0, 0, 0, 0)", `the mark is highlighted (background: ${markBackground})`);

  // The conversation lists the room's messages around this one, each marked by sender.
  const conversation = await page.$$eval("#conversation li", (lis) =>
    lis.map((li) => ({
      sender: li.querySelector(".sender").textContent.trim(),
      same: li.classList.contains("same-sender"),
      text: li.querySelector(".toxic") ? li.querySelector(".toxic").textContent.trim() : "",
    })));

  // Decide with a shortcut: type a reason, leave the field, press "r" (remove message).
  await page.fill("#reason", reason);
  await page.keyboard.press("Escape");
  await Promise.all([page.waitForURL("**/console/audit?item_id=*"), page.keyboard.press("r")]);

  // The audit trail shows the decision.
  const audit = await page.$$eval("#audit tbody tr[data-action]", (trs) =>
    trs.map((tr) => ({
      action: tr.dataset.action,
      actor: tr.children[3].textContent.trim(),
      reason: tr.children[5].textContent.trim(),
      item: tr.children[2].textContent.trim(),
    })));
  const row = audit.find((r) => r.action === "remove_message");
  check(row && row.actor === user && row.reason === reason && row.item === itemId, "audit row for the decision");
  check(consoleErrors.length === 0, `no browser console errors: ${consoleErrors.join(" | ")}`);

  return { itemId, audit, shownText, marked, conversation };
});
