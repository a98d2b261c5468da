"use strict";
// @azure/service-bus 7.9.5 against Busbar: send, batches, schedules,
// both receive modes, settlement, peek, the streaming subscribe() receiver
// and receiveMessages (which drains the link's credit).

const { test, after } = require("node:test");
const assert = require("node:assert/strict");
const { entity, newClient, receiveN, peekAll, bodies, TEST_TIMEOUT } = require("./helpers");

const client = newClient();
after(() => client.close());

test("send and receive in peek-lock mode, then complete", { timeout: TEST_TIMEOUT }, async () => {
  const q = entity("send");
  const sender = client.createSender(q);
  await sender.sendMessages({ body: { hello: "world" }, messageId: "m-1", subject: "greeting", applicationProperties: { n: 7, ok: true } });
  const receiver = client.createReceiver(q);
  const [m] = await receiveN(receiver, 1);
  assert.deepEqual(m.body, { hello: "world" });
  assert.equal(m.messageId, "m-1");
  assert.equal(m.subject, "greeting");
  assert.deepEqual(m.applicationProperties, { n: 7, ok: true });
  assert.strictEqual(m.deliveryCount, 0, "the header always carries delivery-count: a first delivery is 0, not undefined");
  assert.ok(m.lockToken, "a peek-lock delivery has a lock token");
  assert.ok(m.lockedUntilUtc > new Date(), "lockedUntilUtc is in the future");
  assert.ok(m.sequenceNumber, "a sequence number");
  await receiver.completeMessage(m);
  assert.deepEqual(await peekAll(receiver), [], "the queue is empty after complete");
  await receiver.close();
  await sender.close();
});

test("receiveAndDelete mode removes messages on delivery", { timeout: TEST_TIMEOUT }, async () => {
  const q = entity("deleteMode");
  const sender = client.createSender(q);
  await sender.sendMessages([{ body: "a" }, { body: "b" }]);
  const receiver = client.createReceiver(q, { receiveMode: "receiveAndDelete" });
  const got = await receiveN(receiver, 2);
  assert.deepEqual(bodies(got), ["a", "b"]);
  assert.deepEqual(await peekAll(receiver), []);
  await receiver.close();
  await sender.close();
});

test("createMessageBatch: a batch arrives in order", { timeout: TEST_TIMEOUT }, async () => {
  const q = entity("batch");
  const sender = client.createSender(q);
  const batch = await sender.createMessageBatch();
  const want = [];
  for (let i = 0; i < 10; i++) {
    want.push(`batch-${i}`);
    assert.ok(batch.tryAddMessage({ body: `batch-${i}` }), `message ${i} fits in the batch`);
  }
  assert.equal(batch.count, 10);
  await sender.sendMessages(batch);
  const receiver = client.createReceiver(q, { receiveMode: "receiveAndDelete" });
  const got = await receiveN(receiver, 10);
  assert.deepEqual(bodies(got), want);
  for (let i = 1; i < got.length; i++) {
    assert.ok(got[i].sequenceNumber.greaterThan(got[i - 1].sequenceNumber), "sequence numbers increase");
  }
  await receiver.close();
  await sender.close();
});

test("scheduleMessages and cancelScheduledMessages", { timeout: TEST_TIMEOUT }, async () => {
  const q = entity("schedule");
  const sender = client.createSender(q);
  const later = new Date(Date.now() + 3600_000);
  const [keep, cancel] = await sender.scheduleMessages([{ body: "keep" }, { body: "cancel" }], later);
  const receiver = client.createReceiver(q);
  let peeked = await peekAll(receiver);
  assert.deepEqual(bodies(peeked), ["keep", "cancel"]);
  for (const m of peeked) {
    assert.equal(m.state, "scheduled");
    assert.strictEqual(m.deliveryCount, 0, "a peeked scheduled message carries delivery-count 0");
    assert.equal(m.scheduledEnqueueTimeUtc.getTime(), later.getTime());
  }
  assert.equal(peeked[0].sequenceNumber.toString(), keep.toString());
  await sender.cancelScheduledMessages([cancel]);
  peeked = await peekAll(receiver);
  assert.deepEqual(bodies(peeked), ["keep"]);

  // A message scheduled two seconds ahead is delivered at its time.
  const at = new Date(Date.now() + 2000);
  await sender.scheduleMessages({ body: "soon" }, at);
  const [m] = await receiveN(receiver, 1, 15_000);
  assert.equal(m.body, "soon");
  assert.ok(Date.now() >= at.getTime() - 100, "not delivered before its scheduled time");
  await receiver.completeMessage(m);
  await receiver.close();
  await sender.close();
});

test("abandon with properties: redelivered with them and a higher delivery count", { timeout: TEST_TIMEOUT }, async () => {
  const q = entity("settle");
  const sender = client.createSender(q);
  await sender.sendMessages({ body: "retry" });
  const receiver = client.createReceiver(q);
  const [first] = await receiveN(receiver, 1);
  await receiver.abandonMessage(first, { reason: "transient", attempt: 1 });
  const [again] = await receiveN(receiver, 1);
  assert.equal(again.body, "retry");
  assert.equal(again.sequenceNumber.toString(), first.sequenceNumber.toString());
  assert.equal(again.deliveryCount, 1, "second delivery (deliveryCount counts redeliveries in JS)");
  assert.equal(again.applicationProperties.reason, "transient");
  assert.equal(again.applicationProperties.attempt, 1);
  await receiver.completeMessage(again);
  await receiver.close();
  await sender.close();
});

test("defer, then receiveDeferredMessages", { timeout: TEST_TIMEOUT }, async () => {
  const q = entity("defer");
  const sender = client.createSender(q);
  await sender.sendMessages([{ body: "later" }, { body: "now" }]);
  const receiver = client.createReceiver(q);
  const [first] = await receiveN(receiver, 1);
  assert.equal(first.body, "later");
  await receiver.deferMessage(first);
  const [next] = await receiveN(receiver, 1);
  assert.equal(next.body, "now");
  await receiver.completeMessage(next);
  const peeked = await peekAll(receiver);
  assert.equal(peeked.length, 1);
  assert.equal(peeked[0].state, "deferred");
  const [deferred] = await receiver.receiveDeferredMessages([first.sequenceNumber]);
  assert.equal(deferred.body, "later");
  assert.equal(deferred.state, "deferred");
  assert.strictEqual(deferred.deliveryCount, 1, "receiving a deferred message is a delivery: one earlier delivery, so 1");
  await receiver.completeMessage(deferred);
  assert.deepEqual(await peekAll(receiver), []);
  await receiver.close();
  await sender.close();
});

test("dead-letter with reason and description, then receive from the DLQ", { timeout: TEST_TIMEOUT }, async () => {
  const q = entity("deadLetter");
  const sender = client.createSender(q);
  await sender.sendMessages({ body: "poison", messageId: "poison-1" });
  const receiver = client.createReceiver(q);
  const [m] = await receiveN(receiver, 1);
  await receiver.deadLetterMessage(m, { deadLetterReason: "InvalidPayload", deadLetterErrorDescription: "not JSON" });
  assert.deepEqual(await peekAll(receiver), []);
  const dlq = client.createReceiver(q, { subQueueType: "deadLetter" });
  const [dm] = await receiveN(dlq, 1);
  assert.equal(dm.body, "poison");
  assert.equal(dm.messageId, "poison-1");
  assert.equal(dm.deadLetterReason, "InvalidPayload");
  assert.equal(dm.deadLetterErrorDescription, "not JSON");
  await dlq.completeMessage(dm);
  assert.deepEqual(await peekAll(dlq), []);
  await dlq.close();
  await receiver.close();
  await sender.close();
});

test("peekMessages reads in order without locking", { timeout: TEST_TIMEOUT }, async () => {
  const q = entity("peek");
  const sender = client.createSender(q);
  await sender.sendMessages([{ body: "p0" }, { body: "p1" }, { body: "p2" }]);
  const receiver = client.createReceiver(q);
  const firstTwo = await receiver.peekMessages(2);
  assert.deepEqual(bodies(firstTwo), ["p0", "p1"]);
  assert.ok(firstTwo[1].sequenceNumber.greaterThan(firstTwo[0].sequenceNumber));
  const rest = await receiver.peekMessages(10);
  assert.deepEqual(bodies(rest), ["p2"], "peek continues where it stopped");
  const from = await receiver.peekMessages(10, { fromSequenceNumber: firstTwo[1].sequenceNumber });
  assert.deepEqual(bodies(from), ["p1", "p2"]);
  const got = await receiveN(receiver, 3);
  for (const m of got) assert.strictEqual(m.deliveryCount, 0, "peeking is not a delivery, and the header carries delivery-count 0");
  for (const m of got) await receiver.completeMessage(m);
  await receiver.close();
  await sender.close();
});

test("subscribe(): a streaming receiver gets messages sent before and after it started", { timeout: TEST_TIMEOUT }, async () => {
  const q = entity("subscribe");
  const sender = client.createSender(q);
  await sender.sendMessages([0, 1, 2].map((i) => ({ body: `s-${i}` })));
  const receiver = client.createReceiver(q);
  const got = [];
  let subscription;
  await new Promise((resolve, reject) => {
    subscription = receiver.subscribe(
      {
        async processMessage(m) {
          got.push(m.body);
          await receiver.completeMessage(m);
          if (got.length === 3) {
            // Keep streaming: these arrive on the same link.
            await sender.sendMessages([3, 4, 5].map((i) => ({ body: `s-${i}` })));
          }
          if (got.length === 6) resolve();
        },
        async processError(args) {
          reject(args.error);
        },
      },
      { autoCompleteMessages: false, maxConcurrentCalls: 1 },
    );
  });
  await subscription.close();
  assert.deepEqual(got, ["s-0", "s-1", "s-2", "s-3", "s-4", "s-5"]);
  assert.deepEqual(await peekAll(receiver), [], "every message was completed");
  await receiver.close();
  await sender.close();
});

test("receiveMessages returns what is there and drains its credit", { timeout: TEST_TIMEOUT }, async () => {
  const q = entity("drain");
  const sender = client.createSender(q);
  await sender.sendMessages([{ body: "d0" }, { body: "d1" }, { body: "d2" }]);
  const receiver = client.createReceiver(q);
  // Ask for more than there is: the SDK drains the rest of its credit and
  // returns the three once the broker answers the drain.
  const got = await receiver.receiveMessages(10, { maxWaitTimeInMs: 5_000 });
  assert.deepEqual(bodies(got), ["d0", "d1", "d2"]);
  for (const m of got) await receiver.completeMessage(m);
  // Nothing left: an empty answer after the wait, not a hang.
  const start = Date.now();
  const none = await receiver.receiveMessages(5, { maxWaitTimeInMs: 1_000 });
  assert.deepEqual(none, []);
  assert.ok(Date.now() - start < 10_000, "an empty receive returns soon after its wait");
  // No credit was left behind: a new message goes to the next call.
  await sender.sendMessages({ body: "d3" });
  const [m] = await receiveN(receiver, 1);
  assert.equal(m.body, "d3");
  assert.strictEqual(m.deliveryCount, 0, "d3 was not delivered earlier on leftover credit");
  await receiver.completeMessage(m);
  await receiver.close();
  await sender.close();
});
