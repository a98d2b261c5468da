// create_e2e.js drives the console's New queue page in headless Chromium
// (Debian's chromium, through playwright-core from test/node, found by
// NODE_PATH): the form offers every settable property with the broker's
// defaults, and sends only what was changed. It creates "dedupe" (duplicate
// detection with a 2-minute window, auto-delete after an idle hour: fields
// the form once lacked) and "plain" (the form untouched). Run by
// console/browser_test.go, which then checks both queues in the broker; it
// prints OK last when every check passed.
'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require('playwright-core');

const base = process.env.BUSBAR_CONSOLE_URL; // http://127.0.0.1:PORT/ui/
const rootCS = process.env.BUSBAR_CONNECTION_STRING;
const chromiumPath = process.env.BUSBAR_CHROMIUM || '/usr/bin/chromium';

const step = (s) => console.log('step:', s);

async function main() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'busbar-chromium-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1280, height: 860 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = ctx.pages()[0] || await ctx.newPage();
    page.on('pageerror', (e) => { throw e; });
    // The properties of every entity the page creates, as sent.
    const sent = {};
    page.on('request', (r) => {
      if (r.method() === 'POST' && new URL(r.url()).pathname.endsWith('/api/entity')) {
        const b = JSON.parse(r.postData());
        if (b.create) sent[b.path] = b.properties;
      }
    });

    step('sign in');
    await page.goto(base);
    await page.getByLabel('Connection string').fill(rootCS);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Namespace' }).waitFor();

    step('a new queue offers the broker defaults of every property');
    await page.getByRole('link', { name: 'New queue' }).click();
    await page.getByRole('heading', { name: 'New queue' }).waitFor();
    const dupWindow = page.getByLabel('DuplicateDetectionHistoryTimeWindow');
    assert.equal(await dupWindow.inputValue(), 'PT10M');
    assert.equal(await page.getByLabel('LockDuration').inputValue(), 'PT1M');
    assert.equal(await page.getByLabel('MaxDeliveryCount').inputValue(), '10');
    assert.equal(await page.getByLabel('Status').inputValue(), 'Active');
    assert.equal(await page.getByLabel('EnableBatchedOperations').isChecked(), false);

    step('create a queue with duplicate detection and auto-delete on idle');
    await page.getByLabel('Queue name').fill('dedupe');
    await page.getByLabel('RequiresDuplicateDetection').check();
    await dupWindow.fill('PT2M');
    await page.getByLabel('AutoDeleteOnIdle').fill('PT1H');
    await page.getByRole('button', { name: 'Create queue' }).click();
    await page.getByRole('heading', { name: 'queue dedupe' }).waitFor();
    assert.deepEqual(sent.dedupe, { RequiresDuplicateDetection: true, DuplicateDetectionHistoryTimeWindow: 'PT2M', AutoDeleteOnIdle: 'PT1H' });

    step('an untouched form sends no property');
    await page.goto(base + '#/new/queue');
    await page.getByLabel('Queue name').fill('plain');
    await page.getByRole('button', { name: 'Create queue' }).click();
    await page.getByRole('heading', { name: 'queue plain' }).waitFor();
    assert.deepEqual(sent.plain, {});

    step('an unknown kind is refused and leads back to the namespace');
    await page.goto(base + '#/new/widget');
    await page.getByText('kind "widget" is not queue, topic or subscription').waitFor();
    await page.getByRole('heading', { name: 'Namespace' }).waitFor();
  } finally {
    await ctx.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  console.log('OK');
}

main().catch((e) => { console.error(e); process.exit(1); });
