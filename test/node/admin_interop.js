// Drives Busbar's ATOM management API with the official JS administration
// client (@azure/service-bus ServiceBusAdministrationClient). Run by
// admin/node_test.go, which starts the server and prepares the runtime
// fixtures; it prints "OK" on success and exits non-zero on the first
// failed check.
//
// Environment:
//   BUSBAR_CONNECTION_STRING  Endpoint=sb://127.0.0.1:<port>;SharedAccessKeyName=...;SharedAccessKey=...
//   BUSBAR_RUNTIME_QUEUE      a queue holding 3 active and 1 dead-lettered message
"use strict";

const assert = require("node:assert/strict");
const { ServiceBusAdministrationClient } = require("@azure/service-bus");

const conn = process.env.BUSBAR_CONNECTION_STRING;
const runtimeQueue = process.env.BUSBAR_RUNTIME_QUEUE;

// The client always builds https:// URLs; Busbar's management listener
// speaks plain HTTP, as the emulator's does. Rewrite the scheme of every
// request (the token is signed over the rewritten URL, which Busbar accepts:
// it checks the audience's path, not its scheme or host).
function newClient(connectionString) {
  const client = new ServiceBusAdministrationClient(connectionString, { retryOptions: { maxRetries: 0 } });
  const getUrl = client.getUrl.bind(client);
  client.getUrl = (path, query) => getUrl(path, query).replace(/^https:/, "http:");
  client.pipeline.addPolicy({
    name: "busbarAllowPlainHttp",
    sendRequest: (request, next) => {
      request.allowInsecureConnection = true;
      return next(request);
    },
  });
  return client;
}

async function rejects(promise, statusCode, code) {
  try {
    await promise;
  } catch (err) {
    assert.equal(err.statusCode, statusCode, `status of ${err}`);
    assert.equal(err.code, code, `code of ${err}`);
    return err;
  }
  assert.fail(`expected a ${statusCode} ${code}`);
}

async function listAll(iterable, pageSize) {
  const names = [];
  for await (const page of iterable.byPage({ maxPageSize: pageSize })) {
    for (const item of page) {
      names.push(item.name ?? item.subscriptionName);
    }
  }
  return names;
}

async function main() {
  const client = newClient(conn);
  const endpoint = conn.match(/Endpoint=sb:\/\/([^;/]+)/)[1];

  const ns = await client.getNamespaceProperties();
  assert.equal(ns.name, "busbar-test");
  assert.equal(ns.messagingSku, "Premium");
  assert.equal(ns.messagingUnits, 1);

  // Queues: create with every property, get, update, list, exists, delete.
  await client.createQueue("js-target");
  const q = await client.createQueue("js-q", {
    lockDuration: "PT30S",
    maxSizeInMegabytes: 2048,
    requiresDuplicateDetection: true,
    requiresSession: false,
    defaultMessageTimeToLive: "P1D",
    deadLetteringOnMessageExpiration: true,
    duplicateDetectionHistoryTimeWindow: "PT20M",
    maxDeliveryCount: 6,
    enableBatchedOperations: false,
    autoDeleteOnIdle: "PT5H",
    enablePartitioning: false,
    forwardDeadLetteredMessagesTo: "js-target",
    userMetadata: "js <meta>",
    status: "SendDisabled",
    maxMessageSizeInKilobytes: 512,
  });
  const want = {
    name: "js-q",
    lockDuration: "PT30S",
    maxSizeInMegabytes: 2048,
    requiresDuplicateDetection: true,
    requiresSession: false,
    defaultMessageTimeToLive: "P1D",
    deadLetteringOnMessageExpiration: true,
    duplicateDetectionHistoryTimeWindow: "PT20M",
    maxDeliveryCount: 6,
    enableBatchedOperations: false,
    autoDeleteOnIdle: "PT5H",
    enablePartitioning: false,
    forwardTo: undefined,
    forwardDeadLetteredMessagesTo: `sb://${endpoint}/js-target`,
    userMetadata: "js <meta>",
    status: "SendDisabled",
    enableExpress: false,
    availabilityStatus: "Available",
    maxMessageSizeInKilobytes: 512,
    authorizationRules: undefined,
  };
  for (const got of [q, await client.getQueue("js-q")]) {
    const { _response, ...props } = got;
    assert.deepEqual(props, want);
  }
  await rejects(client.createQueue("js-q"), 409, "MessageEntityAlreadyExistsError");

  const current = await client.getQueue("js-q");
  current.maxDeliveryCount = 9;
  current.status = "Active";
  const updated = await client.updateQueue(current);
  assert.equal(updated.maxDeliveryCount, 9);
  assert.equal(updated.status, "Active");
  assert.equal(updated.lockDuration, "PT30S");
  await rejects(client.updateQueue({ ...current, name: "js-missing" }), 404, "MessageEntityNotFoundError");

  for (const name of ["js-r1", "js-r2", "js-r3"]) {
    await client.createQueue(name);
  }
  const want5 = ["js-q", "js-r1", "js-r2", "js-r3", runtimeQueue, "js-target"].sort();
  assert.deepEqual((await listAll(client.listQueues(), 2)).sort(), want5);
  assert.deepEqual((await listAll(client.listQueues(), 100)).sort(), want5);
  assert.equal(await client.queueExists("js-r2"), true);

  // Runtime properties of the queue the Go side filled.
  const rt = await client.getQueueRuntimeProperties(runtimeQueue);
  assert.equal(rt.name, runtimeQueue);
  assert.equal(rt.activeMessageCount, 3);
  assert.equal(rt.deadLetterMessageCount, 1);
  assert.equal(rt.scheduledMessageCount, 0);
  assert.equal(rt.totalMessageCount, 4);
  assert.ok(rt.sizeInBytes > 0);
  assert.ok(rt.createdAt instanceof Date && !isNaN(rt.createdAt));

  await client.deleteQueue("js-r2");
  assert.equal(await client.queueExists("js-r2"), false);
  await rejects(client.getQueue("js-r2"), 404, "MessageEntityNotFoundError");
  await rejects(client.deleteQueue("js-r2"), 404, "MessageEntityNotFoundError");

  // Topic, subscription, rules.
  const t = await client.createTopic("js-t", { defaultMessageTimeToLive: "PT10H", supportOrdering: true, userMetadata: "tm" });
  assert.equal(t.name, "js-t");
  assert.equal(t.defaultMessageTimeToLive, "PT10H");
  assert.equal(t.supportOrdering, true);
  const s = await client.createSubscription("js-t", "js-s", {
    lockDuration: "PT1M",
    maxDeliveryCount: 3,
    deadLetteringOnFilterEvaluationExceptions: true,
    forwardTo: "js-target",
    defaultRuleOptions: { name: "first", filter: { sqlExpression: "region = 'eu'" } },
  });
  assert.equal(s.subscriptionName, "js-s");
  assert.equal(s.topicName, "js-t");
  assert.equal(s.maxDeliveryCount, 3);
  assert.equal(s.deadLetteringOnFilterEvaluationExceptions, true);
  assert.equal(s.forwardTo, `sb://${endpoint}/js-target`);
  assert.equal(s.status, "Active");
  assert.equal(s.availabilityStatus, "Available");

  const corr = await client.createRule("js-t", "js-s", "corr", {
    correlationId: "c-1",
    subject: "orders",
    contentType: "application/json",
    applicationProperties: { region: "eu", weight: 2.5, vip: true },
  });
  assert.deepEqual(corr.filter, {
    correlationId: "c-1",
    subject: "orders",
    to: undefined,
    replyTo: undefined,
    replyToSessionId: undefined,
    sessionId: undefined,
    messageId: undefined,
    contentType: "application/json",
    applicationProperties: { region: "eu", weight: 2.5, vip: true },
  });
  const sql = await client.createRule(
    "js-t",
    "js-s",
    "sql",
    { sqlExpression: "amount > @min", sqlParameters: { "@min": 10 } },
    { sqlExpression: "SET routed = 'yes'" },
  );
  assert.deepEqual(sql.filter, { sqlExpression: "amount > @min", sqlParameters: { "@min": 10 } });
  assert.deepEqual(sql.action, { sqlExpression: "SET routed = 'yes'", sqlParameters: undefined });
  const got = await client.getRule("js-t", "js-s", "sql");
  assert.equal(got.name, "sql");
  got.filter = { sqlExpression: "amount > 99" };
  const ur = await client.updateRule("js-t", "js-s", got);
  assert.deepEqual(ur.filter, { sqlExpression: "amount > 99", sqlParameters: undefined });
  assert.deepEqual(await listAll(client.listRules("js-t", "js-s"), 1), ["corr", "first", "sql"]);
  await client.deleteRule("js-t", "js-s", "corr");
  assert.equal(await client.ruleExists("js-t", "js-s", "corr"), false);

  const srt = await client.getSubscriptionRuntimeProperties("js-t", "js-s");
  assert.equal(srt.totalMessageCount, 0);
  assert.equal(srt.activeMessageCount, 0);
  const trt = await client.getTopicRuntimeProperties("js-t");
  assert.equal(trt.subscriptionCount, 1);
  assert.deepEqual(await listAll(client.listSubscriptions("js-t"), 10), ["js-s"]);
  assert.deepEqual(await listAll(client.listTopics(), 10), ["js-t"]);

  await client.deleteSubscription("js-t", "js-s");
  assert.equal(await client.subscriptionExists("js-t", "js-s"), false);
  await client.deleteTopic("js-t");
  assert.equal(await client.topicExists("js-t"), false);

  // A wrong key is refused.
  const bad = newClient(conn.replace(/SharedAccessKey=[^;]*/, "SharedAccessKey=wrong"));
  const err = await rejects(bad.getQueue("js-q"), 401, "UnauthorizedRequestError");
  assert.match(err.message, /invalid signature/);

  console.log("OK");
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
