"use strict";
// The seed scenarios with @azure/service-bus 7.9.5 directly (no toolkit):
// seed 000, the order saga on a session-enabled subscription with session
// state and a scheduled timeout; seed 003, the job pipeline with one
// session per job and a failed job's remaining tasks dead-lettered.
// The Go versions are conformance/seed_saga_test.go and
// conformance/seed_pipeline_test.go.

const { test, after } = require("node:test");
const assert = require("node:assert/strict");
const { ServiceBusClient } = require("@azure/service-bus");
const { entity, newClient, receiveN, uniqueId, TEST_TIMEOUT } = require("./helpers");

const client = newClient();
// acceptNextSession waits up to timeoutInMs for a session; keep it short so
// idle processors come back often.
const acceptClient = new ServiceBusClient(process.env.BUSBAR_CONNECTION_STRING, {
  retryOptions: { maxRetries: 0, timeoutInMs: 2_000 },
});
after(async () => {
  await acceptClient.close();
  await client.close();
});

/** Error codes that are a real failure rather than "no session right now". */
const fatalCodes = new Set(["MessagingEntityNotFound", "UnauthorizedAccess"]);

/**
 * Runs `concurrency` session processors: accept the next session, handle
 * its messages one by one until it is idle for idleMs, release it, repeat;
 * until done() or limitMs.
 */
async function runSessionProcessors({ accept, handle, concurrency = 2, idleMs = 1_000, done, limitMs = 45_000 }) {
  const deadline = Date.now() + limitMs;
  let failure;
  let lastAcceptError;
  const worker = async () => {
    while (!failure && !done() && Date.now() < deadline) {
      let r;
      try {
        r = await accept();
      } catch (err) {
        lastAcceptError = err;
        if (fatalCodes.has(err.code)) failure = err;
        continue;
      }
      try {
        while (!failure && !done() && Date.now() < deadline) {
          const msgs = await r.receiveMessages(1, { maxWaitTimeInMs: idleMs });
          if (msgs.length === 0) break;
          for (const m of msgs) await handle(r, m);
        }
      } catch (err) {
        failure = err;
      } finally {
        await r.close().catch(() => {});
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  if (failure) throw failure;
  assert.ok(done(), `the scenario did not finish within ${limitMs} ms (last accept error: ${lastAcceptError})`);
}

/** Records what handlers did, per session. */
class EventLog {
  constructor() {
    this.events = new Map();
  }
  add(session, event) {
    if (!this.events.has(session)) this.events.set(session, []);
    this.events.get(session).push(event);
  }
  get(session) {
    return this.events.get(session) ?? [];
  }
  last(session) {
    const ev = this.get(session);
    return ev[ev.length - 1];
  }
}

test("seed 000: the order saga, completed and compensated", { timeout: TEST_TIMEOUT }, async () => {
  const topic = entity("sagaTopic");
  const sub = entity("sagaSubscription");
  const publisher = client.createSender(topic);
  const happy = uniqueId("order-happy");
  const unhappy = uniqueId("order-unhappy");
  const orderMessage = (order, type, body) => ({
    body,
    sessionId: order,
    correlationId: order,
    applicationProperties: { MessageType: type },
  });
  const log = new EventLog();

  const handle = async (r, m) => {
    const order = r.sessionId;
    const kind = m.applicationProperties.MessageType;
    const saved = await r.getSessionState();
    const started = saved !== null && saved !== undefined;
    const st = started ? saved : { paymentAccepted: false, itemShipped: false };
    if (kind === "PaymentAccepted" || kind === "ItemShipped") {
      if (!started) {
        await publisher.scheduleMessages(orderMessage(order, "Timeout", `check ${order}`), new Date(Date.now() + 2_000));
      }
      if (kind === "PaymentAccepted") st.paymentAccepted = true;
      else st.itemShipped = true;
      log.add(order, kind);
      if (st.paymentAccepted && st.itemShipped) {
        log.add(order, "completed");
        await r.setSessionState(null);
      } else {
        await r.setSessionState(st);
      }
    } else if (kind === "Timeout") {
      if (!started) {
        log.add(order, "timeout discarded");
      } else {
        log.add(order, `compensated (payment ${st.paymentAccepted}, shipment ${st.itemShipped})`);
        await r.setSessionState(null);
      }
    } else {
      log.add(order, `unexpected ${kind}`);
    }
    await r.completeMessage(m);
  };

  await publisher.sendMessages([orderMessage(happy, "PaymentAccepted", "Payment OK"), orderMessage(happy, "Audit", "not for the saga")]);
  await publisher.scheduleMessages(orderMessage(happy, "ItemShipped", "Shipping OK"), new Date(Date.now() + 1_000));
  await publisher.sendMessages(orderMessage(unhappy, "PaymentAccepted", "Payment OK"));

  const finished = (order) => {
    const last = log.last(order) ?? "";
    return last === "timeout discarded" || last.startsWith("compensated");
  };
  await runSessionProcessors({
    accept: () => acceptClient.acceptNextSession(topic, sub),
    handle,
    done: () => finished(happy) && finished(unhappy),
  });

  assert.deepEqual(log.get(happy), ["PaymentAccepted", "ItemShipped", "completed", "timeout discarded"]);
  assert.deepEqual(log.get(unhappy), ["PaymentAccepted", "compensated (payment true, shipment false)"]);
  for (const order of [happy, unhappy]) {
    const r = await client.acceptSession(topic, sub, order);
    assert.equal(await r.getSessionState(), null, `order ${order}: state cleared`);
    assert.deepEqual(await r.peekMessages(10), [], `order ${order}: nothing left (the Audit message matched no rule)`);
    await r.close();
  }
  await publisher.close();
});

test("seed 003: the job pipeline, a failed job skipped and another finished", { timeout: TEST_TIMEOUT }, async () => {
  const q = entity("jobs");
  const purchase = uniqueId("job-purchase");
  const imports = uniqueId("job-import");
  const task = (job, name, last, fails) => ({
    body: name,
    sessionId: job,
    applicationProperties: { IsLastMessage: last, Fails: fails },
  });
  const sender = client.createSender(q);
  await sender.sendMessages([
    task(purchase, "generate order number", false, false),
    task(imports, "import product 1", false, false),
    task(purchase, "process payment", false, true),
    task(imports, "import product 2", false, false),
    task(purchase, "generate receipt", false, false),
    task(imports, "import product 3", true, false),
    task(purchase, "send email", true, false),
  ]);

  const log = new EventLog();
  let settled = 0;
  const attempts = 2;
  const handle = async (r, m) => {
    const job = r.sessionId;
    const name = m.body;
    const state = await r.getSessionState();
    const { IsLastMessage: last, Fails: fails } = m.applicationProperties;
    const delivery = (m.deliveryCount ?? 0) + 1;
    if (state && state.isFailedSession) {
      log.add(job, `skipped ${name}`);
      await r.deadLetterMessage(m, { deadLetterReason: "SessionFailed", deadLetterErrorDescription: "an earlier task of the job failed" });
    } else if (fails && delivery < attempts) {
      log.add(job, `failed ${name} (attempt ${delivery})`);
      await r.abandonMessage(m);
      return;
    } else if (fails) {
      log.add(job, `failed ${name} (attempt ${delivery}), job failed`);
      await r.setSessionState({ isFailedSession: true });
      await r.deadLetterMessage(m, { deadLetterReason: "TaskFailed", deadLetterErrorDescription: "payment service unavailable" });
    } else {
      log.add(job, `ran ${name}`);
      await r.completeMessage(m);
    }
    if (last) await r.setSessionState(null);
    settled++;
  };

  await runSessionProcessors({
    accept: () => acceptClient.acceptNextSession(q),
    handle,
    done: () => settled === 7,
  });

  assert.deepEqual(log.get(purchase), [
    "ran generate order number",
    "failed process payment (attempt 1)",
    "failed process payment (attempt 2), job failed",
    "skipped generate receipt",
    "skipped send email",
  ]);
  assert.deepEqual(log.get(imports), ["ran import product 1", "ran import product 2", "ran import product 3"]);

  const dlq = client.createReceiver(q, { subQueueType: "deadLetter", receiveMode: "receiveAndDelete" });
  const dead = await receiveN(dlq, 3);
  assert.deepEqual(
    dead.map((m) => [m.body, m.deadLetterReason, m.sessionId]),
    [
      ["process payment", "TaskFailed", purchase],
      ["generate receipt", "SessionFailed", purchase],
      ["send email", "SessionFailed", purchase],
    ],
  );
  await dlq.close();
  for (const job of [purchase, imports]) {
    const r = await client.acceptSession(q, job);
    assert.equal(await r.getSessionState(), null, `job ${job}: state cleared by its last task`);
    await r.close();
  }
  await sender.close();
});
