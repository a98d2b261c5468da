"use strict";
// Shared helpers of the Node conformance suite. The Go test
// TestNodeConformance (conformance/node_test.go) starts the broker, creates
// the entities and passes their names in BUSBAR_CONFORMANCE_ENTITY_NAMES.

const assert = require("node:assert/strict");
const { ServiceBusClient } = require("@azure/service-bus");

const connectionString = process.env.BUSBAR_CONNECTION_STRING;
const runId = process.env.BUSBAR_CONFORMANCE_RUN_ID || String(Date.now());

/** The entity names by key, as created by the Go runner. */
const entities = JSON.parse(process.env.BUSBAR_CONFORMANCE_ENTITY_NAMES || "{}");

/** Per-test time limit for node:test, in ms. */
const TEST_TIMEOUT = 30_000;

/** Returns the name of the entity the runner created for key. */
function entity(key) {
  const name = entities[key];
  assert.ok(name, `no entity "${key}" in BUSBAR_CONFORMANCE_ENTITY_NAMES; run this suite through go test ./conformance`);
  return name;
}

/**
 * Returns a ServiceBusClient for the broker under test, with short retries
 * so a failing test reports quickly. Close it when done.
 */
function newClient() {
  assert.ok(connectionString, "BUSBAR_CONNECTION_STRING is not set; run this suite through go test ./conformance");
  return new ServiceBusClient(connectionString, {
    retryOptions: { maxRetries: 1, retryDelayInMs: 200, timeoutInMs: 10_000 },
  });
}

/**
 * Receives exactly n messages with receiveMessages, failing if they do not
 * all arrive within limitMs.
 */
async function receiveN(receiver, n, limitMs = 20_000) {
  const deadline = Date.now() + limitMs;
  const got = [];
  while (got.length < n) {
    const left = deadline - Date.now();
    if (left <= 0) {
      assert.fail(`received ${got.length} of ${n} messages (${JSON.stringify(got.map((m) => m.body))}) within ${limitMs} ms`);
    }
    const batch = await receiver.receiveMessages(n - got.length, { maxWaitTimeInMs: Math.min(left, 5_000) });
    got.push(...batch);
  }
  assert.equal(got.length, n, `asked for ${n} messages`);
  return got;
}

/** Peeks up to 100 messages from the start of the entity. */
async function peekAll(receiver) {
  return receiver.peekMessages(100, { fromSequenceNumber: require("long").fromNumber(0) });
}

/** The bodies of messages. */
function bodies(messages) {
  return messages.map((m) => m.body);
}

/** A unique id for this run. */
function uniqueId(prefix) {
  return `${prefix}-${runId}-${Math.random().toString(16).slice(2, 8)}`;
}

module.exports = { entity, newClient, receiveN, peekAll, bodies, uniqueId, TEST_TIMEOUT };
