"use strict";
// A quick check, run by TestNodeConformance before the suite: one message
// sent and received with @azure/service-bus within a few seconds. When the
// broker cannot serve the JS SDK at all, this reports why at once instead
// of letting every test of the suite time out.

const { ServiceBusClient } = require("@azure/service-bus");
const { entity } = require("./helpers");

async function sendAndReceive(client) {
  const q = entity("preflight");
  const sender = client.createSender(q);
  await sender.sendMessages({ body: "preflight" });
  const receiver = client.createReceiver(q, { receiveMode: "receiveAndDelete" });
  const got = await receiver.receiveMessages(1, { maxWaitTimeInMs: 8_000 });
  if (got.length !== 1 || got[0].body !== "preflight") {
    throw new Error(`received ${JSON.stringify(got.map((m) => m.body))}, want ["preflight"]`);
  }
}

async function main() {
  const client = new ServiceBusClient(process.env.BUSBAR_CONNECTION_STRING, {
    retryOptions: { maxRetries: 0, timeoutInMs: 8_000 },
  });
  let code = 0;
  try {
    await sendAndReceive(client);
    console.log("preflight: @azure/service-bus sent and received a message");
  } catch (err) {
    console.error(`preflight: @azure/service-bus cannot send and receive: ${err.stack || err}`);
    code = 1;
  }
  // Closing a client whose links never came up can hang; do not wait long.
  await Promise.race([client.close(), new Promise((resolve) => setTimeout(resolve, 2_000))]);
  process.exit(code);
}

main();
