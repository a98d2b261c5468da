// console_e2e.js drives Busbar's web console in headless Chromium
// (Debian's chromium, through playwright-core): sign-in, creating queues
// (the New queue page offers every property with the broker's defaults and
// sends only what was changed; console/browser_test.go checks the queues
// "dedupe" and "plain" in the broker afterwards), sending, peeking, dead-lettering and resubmitting, editing session state,
// a rule's SQL validated as it is typed, and a Listen-only key that cannot
// delete. It writes a screenshot of each main page to BUSBAR_SCREENSHOTS.
// Run by console/browser_test.go; it prints OK last when every check passed.
'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require('playwright-core');

const base = process.env.BUSBAR_CONSOLE_URL; // http://127.0.0.1:PORT/ui/
const rootCS = process.env.BUSBAR_CONNECTION_STRING;
const listenKey = process.env.BUSBAR_LISTEN_KEY; // name:key
const shots = process.env.BUSBAR_SCREENSHOTS || '';
const chromiumPath = process.env.BUSBAR_CHROMIUM || '/usr/bin/chromium';

const step = (s) => console.log('step:', s);

async function shot(page, name) {
  if (!shots) return;
  fs.mkdirSync(shots, { recursive: true });
  await page.evaluate(() => { document.getElementById('status').textContent = ''; window.scrollTo(0, 0); });
  await page.screenshot({ path: path.join(shots, name + '.png'), fullPage: false });
}

async function signIn(page, fill) {
  await page.goto(base);
  await page.getByRole('heading', { name: 'Sign in to Busbar' }).waitFor();
  await fill();
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Namespace' }).waitFor();
}

async function main() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'busbar-chromium-'));
  // A persistent context on a fresh profile directory is how Playwright
  // takes --user-data-dir.
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1280, height: 860 },
    colorScheme: 'light',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const requests = [];
  try {
    const page = ctx.pages()[0] || await ctx.newPage();
    page.on('request', (r) => requests.push(r.url()));
    // The properties of every entity the page creates, as sent.
    const created = {};
    page.on('request', (r) => {
      if (r.method() === 'POST' && new URL(r.url()).pathname.endsWith('/api/entity')) {
        const b = JSON.parse(r.postData());
        if (b.create) created[b.path] = b.properties;
      }
    });
    page.on('pageerror', (e) => { throw e; });

    step('sign in with a connection string');
    await page.goto(base);
    await page.getByRole('heading', { name: 'Sign in to Busbar' }).waitFor();
    await shot(page, 'signin');
    await page.getByLabel('Connection string').fill('Endpoint=sb://x;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=wrong');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('the key name or the key is wrong').waitFor();
    await page.getByLabel('Connection string').fill(rootCS);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Namespace' }).waitFor();
    assert.equal(await page.locator('#who').textContent(), 'RootManageSharedAccessKey · Listen, Send, Manage');
    const cookies = await ctx.cookies();
    assert.equal(cookies.length, 1);
    assert.equal(cookies[0].httpOnly, true);
    assert.equal(cookies[0].sameSite, 'Strict');
    assert.ok(!page.url().includes('SharedAccessKey'), 'no secret in the URL');

    step('create a queue');
    await page.getByRole('link', { name: 'New queue' }).click();
    await page.getByLabel('Queue name').fill('orders');
    await page.getByLabel('MaxDeliveryCount').fill('-1');
    await page.getByRole('button', { name: 'Create queue' }).click();
    await page.getByRole('alert').filter({ hasText: 'MaxDeliveryCount -1 is below 1' }).waitFor(); // the service's validation message
    await page.getByLabel('MaxDeliveryCount').fill('5');
    await page.getByRole('button', { name: 'Create queue' }).click();
    await page.getByRole('heading', { name: 'queue orders' }).waitFor();
    assert.deepEqual(created.orders, { MaxDeliveryCount: 5 }, 'only the changed field is sent');

    step('a new queue offers every property with the broker\'s defaults');
    await page.goto(base + '#/new/queue');
    await page.getByRole('heading', { name: 'New queue' }).waitFor();
    const dupWindow = page.getByLabel('DuplicateDetectionHistoryTimeWindow');
    assert.equal(await dupWindow.inputValue(), 'PT10M');
    assert.equal(await page.getByLabel('LockDuration').inputValue(), 'PT1M');
    assert.equal(await page.getByLabel('MaxDeliveryCount').inputValue(), '10');
    assert.equal(await page.getByLabel('Status').inputValue(), 'Active');
    assert.equal(await page.getByLabel('EnableBatchedOperations').isChecked(), false);
    await page.getByLabel('Queue name').fill('dedupe');
    await page.getByLabel('RequiresDuplicateDetection').check();
    await dupWindow.fill('PT2M');
    await page.getByLabel('AutoDeleteOnIdle').fill('PT1H');
    await page.getByRole('button', { name: 'Create queue' }).click();
    await page.getByRole('heading', { name: 'queue dedupe' }).waitFor();
    assert.deepEqual(created.dedupe, { RequiresDuplicateDetection: true, DuplicateDetectionHistoryTimeWindow: 'PT2M', AutoDeleteOnIdle: 'PT1H' });
    await page.goto(base + '#/new/queue');
    await page.getByLabel('Queue name').fill('plain');
    await page.getByRole('button', { name: 'Create queue' }).click();
    await page.getByRole('heading', { name: 'queue plain' }).waitFor();
    assert.deepEqual(created.plain, {}, 'an untouched form sends no property');
    await page.goto(base + '#/new/widget');
    await page.getByText('kind "widget" is not queue, topic or subscription').waitFor();
    await page.getByRole('heading', { name: 'Namespace' }).waitFor();
    await page.goto(base + '#/e/orders');
    await page.getByRole('heading', { name: 'queue orders' }).waitFor();

    step('send and peek');
    await page.getByRole('link', { name: 'Messages' }).click();
    const send = page.getByRole('form', { name: 'Send a message' });
    await send.getByLabel('Body', { exact: true }).fill('{"order":42,"items":["tea","milk"]}');
    await send.getByLabel('Subject').fill('OrderPlaced');
    await send.getByLabel('Application properties (JSON object)').fill('{"region":"eu","priority":3}');
    await send.getByRole('button', { name: 'Send', exact: true }).click();
    await page.getByText('Sent 1 message').waitFor();
    await send.getByLabel('Body', { exact: true }).fill('<order id="43"><item>bread</item></order>');
    await send.getByLabel('Subject').fill('OrderPlaced');
    await send.getByLabel('Content type').fill('application/xml');
    await send.getByLabel('Application properties (JSON object)').fill('{"region":"us"}');
    await send.getByRole('button', { name: 'Send', exact: true }).click();
    await page.getByText('Sent 1 message').waitFor();
    await page.getByRole('button', { name: 'Show message 2' }).click();
    const body = page.getByLabel('Message body');
    await body.waitFor();
    assert.match(await body.textContent(), /<order id="43">\n {2}<item>bread<\/item>/);
    await page.getByRole('button', { name: 'Show message 1' }).click();
    assert.equal(await body.textContent(), JSON.stringify({ order: 42, items: ['tea', 'milk'] }, null, 2));
    await page.getByRole('button', { name: 'HEX' }).click();
    assert.match(await body.textContent(), /^00000000 {2}7b 22 6f 72/);
    await page.getByRole('button', { name: 'AUTO' }).click();
    await page.getByRole('search').getByLabel('Property').fill('region=us');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('1 shown').waitFor();
    await page.getByRole('button', { name: 'Show message 2' }).waitFor();
    await page.getByRole('search').getByLabel('Property').fill('');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('2 shown').waitFor();
    await page.getByRole('button', { name: 'Show message 1' }).click();
    await shot(page, 'messages');

    step('dead-letter and resubmit');
    await page.getByLabel('Messages', { exact: true }).fill('1');
    await page.getByRole('button', { name: 'Dead-letter' }).click();
    await page.getByText('Dead-lettered 1 message(s)').waitFor();
    await page.getByRole('link', { name: 'Dead letters' }).click();
    await page.getByRole('heading', { name: 'Reasons (1 dead letters)' }).waitFor();
    await page.getByRole('button', { name: 'Show dead letters with reason DeadLetteredFromConsole' }).waitFor();
    await page.getByLabel('Select message 1').check();
    await shot(page, 'deadletters');
    await page.getByRole('button', { name: 'Resubmit selected' }).click();
    await page.getByText('Resubmitted 1 of 1 selected; 0 failed').waitFor();
    await page.getByRole('heading', { name: 'Reasons (0 dead letters)' }).waitFor();
    await shot(page, 'resubmit-report');
    await page.getByRole('link', { name: 'Messages' }).click();
    await page.getByText('2 shown').waitFor();
    await page.getByRole('button', { name: 'Show message 3' }).click(); // resubmitted: a new sequence number
    assert.equal(await page.getByLabel('Message body').textContent(), JSON.stringify({ order: 42, items: ['tea', 'milk'] }, null, 2));
    assert.equal(await page.locator('section[aria-label="Message 3"]').getByText('DeadLetterReason').count(), 0);

    step('session state');
    await page.goto(base + '#/new/queue');
    await page.getByLabel('Queue name').fill('workflows');
    await page.getByLabel('RequiresSession').check();
    await page.getByRole('button', { name: 'Create queue' }).click();
    await page.getByRole('heading', { name: 'queue workflows' }).waitFor();
    await page.getByRole('link', { name: 'Messages' }).click();
    await send.getByLabel('Body', { exact: true }).fill('{"step":"reserve"}');
    await send.getByLabel('Session id').fill('order-42');
    await send.getByRole('button', { name: 'Send', exact: true }).click();
    await page.getByText('Sent 1 message').waitFor();
    await page.getByRole('link', { name: 'Sessions' }).click();
    await page.getByRole('button', { name: 'Open session order-42' }).click();
    const state = page.getByLabel('State', { exact: true });
    await state.fill('{"saga":"checkout","id":"order-42","status":"running",');
    await page.getByText('Not valid JSON').waitFor();
    await state.fill(JSON.stringify({ saga: 'checkout', id: 'order-42', status: 'running', version: 3, schema: 1,
      started: '2026-01-01T10:00:00Z', updated: '2026-01-01T10:05:00Z',
      timeouts: { payment: { seq: 7, due: '2026-01-01T11:00:00Z', kind: 'PaymentTimeout' } }, state: { paid: false } }));
    await page.getByRole('button', { name: 'Save state' }).click();
    await page.getByText('Saved the state of session order-42').waitFor();
    // Reopened from the broker, pretty-printed.
    await page.waitForFunction(() => (document.querySelector('textarea[name=state]') || {}).value?.includes('"status": "running"'));
    await shot(page, 'sessions');

    step('toolkit view');
    await page.getByRole('link', { name: 'Toolkit' }).click();
    await page.getByRole('heading', { name: 'Sagas (1)' }).waitFor();
    await page.getByText('payment due 2026-01-01 11:00:00 (seq 7)').waitFor();
    await page.getByRole('cell', { name: 'card declined' }).waitFor();
    await shot(page, 'toolkit');
    await page.getByRole('button', { name: 'Pause schedule nightly' }).click();
    await page.getByText('Paused nightly').waitFor();
    await page.getByRole('cell', { name: 'paused', exact: true }).waitFor();
    await page.getByRole('button', { name: 'Trigger schedule nightly' }).click();
    await page.getByText('Triggered nightly').waitFor();
    await page.getByRole('button', { name: 'Resubmit job order-7' }).click();
    await page.getByText(/Resubmitted order-7 as \S+/).waitFor();
    await page.getByRole('heading', { name: 'Failed pipeline tasks (0)' }).waitFor();

    step('topic, subscription and a rule validated as it is typed');
    await page.goto(base + '#/new/topic');
    await page.getByLabel('Topic name').fill('events');
    await page.getByRole('button', { name: 'Create topic' }).click();
    await page.getByRole('heading', { name: 'topic events' }).waitFor();
    await page.getByRole('link', { name: 'Subscriptions' }).click();
    await page.getByRole('link', { name: 'New subscription' }).click();
    await page.getByLabel('Subscription name (topic events)').fill('audit');
    await page.getByRole('button', { name: 'Create subscription' }).click();
    await page.getByRole('heading', { name: 'subscription events/Subscriptions/audit' }).waitFor();
    await page.getByRole('link', { name: 'Rules' }).click();
    await page.getByRole('button', { name: 'New rule' }).click();
    await page.getByLabel('Name', { exact: true }).fill('eu-only');
    const sql = page.getByLabel('SQL filter');
    await sql.fill("region = 'eu' AND");
    await page.getByText(/line 1, column \d+/).waitFor();
    assert.equal(await sql.getAttribute('aria-invalid'), 'true');
    await sql.fill("region = 'eu' AND priority > 2");
    await page.getByText('Valid.').first().waitFor();
    await page.getByLabel('SQL action (optional)').fill("SET audited = 'yes'");
    await page.getByRole('button', { name: 'Add rule' }).click();
    await page.getByText('Saved rule eu-only').waitFor();
    await page.getByRole('cell', { name: "region = 'eu' AND priority > 2" }).waitFor();
    await shot(page, 'rules');

    step('overview with its charts, and the namespace');
    // The test's broker samples every second and has traffic on "telemetry".
    await page.goto(base + '#/e/telemetry');
    await page.getByRole('heading', { name: 'Last hour' }).waitFor();
    await page.locator('svg[aria-label="Messages in and out per second over the last hour"] polyline.in').waitFor({ timeout: 15000 });
    await page.waitForFunction(() => [...document.querySelectorAll('.card .n')].slice(5).some((n) => Number(n.textContent) > 0), null, { timeout: 15000 });
    await shot(page, 'overview');
    await page.goto(base + '#/');
    await page.getByRole('cell', { name: 'orders' }).waitFor();
    await shot(page, 'namespace');

    step('dark theme and a phone-width screen');
    await page.getByRole('button', { name: 'Switch between dark and light theme' }).click();
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'dark');
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(base + '#/e/orders/messages');
    await page.getByRole('button', { name: 'Show message 2' }).waitFor();
    assert.equal(await page.locator('#tree').isVisible(), false, 'the tree folds away on a phone');
    await page.getByRole('button', { name: 'Entities' }).click();
    await page.locator('#tree').getByRole('link', { name: /workflows/ }).waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the page is ${overflow}px wider than a phone`);
    await shot(page, 'phone-dark');

    step('keyboard: sign out and sign in again without a mouse');
    await page.setViewportSize({ width: 1280, height: 860 });
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to Busbar' }).waitFor();
    assert.equal(await page.evaluate(() => document.activeElement.name), 'connectionString', 'the sign-in form takes the focus');
    await page.keyboard.type(rootCS);
    await page.keyboard.press('Tab'); // key name
    await page.keyboard.press('Tab'); // key
    await page.keyboard.press('Tab'); // entity path
    await page.keyboard.press('Tab'); // the sign-in button
    assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Sign in');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'queue orders' }).waitFor(); // back where it was
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to Busbar' }).waitFor();
    assert.equal((await ctx.cookies()).length, 0, 'signing out removes the cookie');

    step('a Listen-only key sees, never deletes');
    const lp = page;
    const [kn, key] = listenKey.split(':');
    await signIn(lp, async () => {
      await lp.getByLabel('Key name').fill(kn);
      await lp.getByLabel('Key', { exact: true }).fill(key);
    });
    assert.equal(await lp.locator('#who').textContent(), `${kn} · Listen`);
    assert.equal(await lp.getByRole('link', { name: 'New queue' }).count(), 0);
    assert.equal(await lp.getByText('null', { exact: true }).count(), 0, 'a missing control leaves no trace');
    await lp.goto(base + '#/e/orders');
    await lp.getByRole('heading', { name: 'Last hour' }).waitFor();
    assert.equal(await lp.getByRole('button', { name: 'Delete queue' }).count(), 0);
    await lp.getByRole('link', { name: 'Messages' }).click();
    await lp.getByRole('button', { name: 'Show message 2' }).waitFor();
    assert.equal(await lp.getByRole('button', { name: 'Send', exact: true }).count(), 0);
    await lp.goto(base + '#/toolkit');
    await lp.getByRole('heading', { name: 'Schedules (1)' }).waitFor();
    assert.equal(await lp.getByRole('button', { name: /Pause|Resume|Trigger/ }).count(), 0);
    assert.equal(await lp.getByText('null', { exact: true }).count(), 0, 'a missing control leaves no trace');
    // The API refuses, whatever the page shows.
    const st = await lp.evaluate(async () => {
      const me = await (await fetch('api/me')).json();
      const r = await fetch('api/entity?path=orders', { method: 'DELETE', headers: { 'X-Busbar-Csrf': me.csrf } });
      return [r.status, (await r.json()).error];
    });
    assert.equal(st[0], 403);
    assert.match(st[1], /needs the Manage right/);

    const foreign = requests.filter((u) => !u.startsWith(new URL(base).origin) && !u.startsWith('data:'));
    assert.deepEqual(foreign, [], 'the browser asked nothing but the broker');
  } finally {
    await ctx.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  console.log('OK');
}

main().catch((e) => { console.error(e); process.exit(1); });
