"use strict";
// @azure/service-bus 7.9.5 sessions against Busbar: accepting named and
// next sessions, session state, FIFO through a streaming subscribe() on a
// session receiver, peek within a session.

const { test, after } = require("node:test");
const assert = require("node:assert/strict");
const { entity, newClient, receiveN, bodies, TEST_TIMEOUT } = require("./helpers");

const client = newClient();
after(() => client.close());

test("acceptSession and acceptNextSession", { timeout: TEST_TIMEOUT }, async () => {
  const q = entity("sessions");
  const sender = client.createSender(q);
  await sender.sendMessages([
    { body: "a1", sessionId: "a" },
    { body: "b1", sessionId: "b" },
    { body: "a2", sessionId: "a" },
  ]);
  const b = await client.acceptSession(q, "b");
  assert.equal(b.sessionId, "b");
  assert.ok(b.sessionLockedUntilUtc > new Date(), "the session lock is in the future");
  const [b1] = await receiveN(b, 1);
  assert.equal(b1.body, "b1");
  assert.equal(b1.sessionId, "b");
  await b.completeMessage(b1);

  // Session b is held by us: the next available one is a.
  const a = await client.acceptNextSession(q);
  assert.equal(a.sessionId, "a");
  const peeked = await a.peekMessages(10);
  assert.deepEqual(bodies(peeked), ["a1", "a2"], "peek sees the session's messages only");
  const got = await receiveN(a, 2);
  assert.deepEqual(bodies(got), ["a1", "a2"]);
  for (const m of got) await a.completeMessage(m);
  await a.close();
  await b.close();
  await sender.close();
});

test("session state: set, get, kept across receivers, cleared with null", { timeout: TEST_TIMEOUT }, async () => {
  const q = entity("sessionState");
  const sender = client.createSender(q);
  await sender.sendMessages({ body: "x", sessionId: "stateful" });
  let r = await client.acceptSession(q, "stateful");
  assert.equal(await r.getSessionState(), null, "a new session has no state");
  await r.setSessionState({ step: 2, failed: false });
  assert.deepEqual(await r.getSessionState(), { step: 2, failed: false });
  await r.close();

  r = await client.acceptSession(q, "stateful");
  assert.deepEqual(await r.getSessionState(), { step: 2, failed: false }, "state outlives the receiver");
  await r.setSessionState(null);
  assert.equal(await r.getSessionState(), null, "cleared");
  const [m] = await receiveN(r, 1);
  await r.completeMessage(m);
  await r.close();
  await sender.close();
});

test("FIFO per session through subscribe() on a session receiver", { timeout: TEST_TIMEOUT }, async () => {
  const q = entity("sessionFifo");
  const sender = client.createSender(q);
  const want = { red: [], blue: [] };
  const batch = await sender.createMessageBatch();
  for (let i = 0; i < 10; i++) {
    for (const id of ["red", "blue"]) {
      const body = `${id}-${i}`;
      want[id].push(body);
      assert.ok(batch.tryAddMessage({ body, sessionId: id }));
    }
  }
  await sender.sendMessages(batch);
  for (const id of ["blue", "red"]) {
    const r = await client.acceptSession(q, id);
    const got = [];
    let subscription;
    await new Promise((resolve, reject) => {
      subscription = r.subscribe(
        {
          async processMessage(m) {
            got.push(m.body);
            if (got.length === 10) resolve();
          },
          async processError(args) {
            reject(args.error);
          },
        },
        { autoCompleteMessages: true },
      );
    });
    await subscription.close();
    assert.deepEqual(got, want[id], `session ${id} in order`);
    await r.close();
  }
  await sender.close();
});

test('"" is a session id: a session-enabled queue takes it (and refuses a message without one)', { timeout: TEST_TIMEOUT }, async () => {
  // @azure/service-bus 7.9.5 cannot accept session "" itself: it treats a
  // falsy session id in the attach answer as "no session" (createRheaLink),
  // so the Go suite (TestEmptySessionID) receives it; here the send side.
  const q = entity("emptySession");
  const sender = client.createSender(q);
  await sender.sendMessages({ body: "e1", sessionId: "" });
  await assert.rejects(sender.sendMessages({ body: "none" }), /session/i, "a message without a session id is refused");
  await sender.close();
});
