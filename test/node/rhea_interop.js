'use strict';
// Interop check of Busbar's AMQP engine with rhea as the client. Run by
// amqp/rhea_test.go against the engine's in-memory test broker:
//   node test/node/rhea_interop.js <port>
// It sends unsettled and pre-settled messages, receives them with manual
// credit, settles them, drains the remaining credit, and closes. Exit code
// 0 means every step behaved as the AMQP 1.0 specification says.
const rhea = require('rhea');

const port = Number(process.argv[2]);
const address = 'rhea-q';
const unsettled = 10;
const presettled = 2;
const total = unsettled + presettled;

function fail(msg) {
  console.error('FAIL: ' + msg);
  process.exit(1);
}
setTimeout(() => fail('timed out'), 30000).unref();

const container = rhea.create_container({ id: 'rhea-interop' });
let done = false;
const conn = container.connect({
  host: '127.0.0.1',
  port: port,
  username: 'interop', // no password: SASL ANONYMOUS
  reconnect: false,
  idle_time_out: 5000,
});
conn.on('connection_error', (ctx) => fail('connection error: ' + JSON.stringify(ctx.connection.error)));
conn.on('disconnected', (ctx) => { if (!done) fail('disconnected: ' + (ctx.error || 'no error')); });

// Step 1: unsettled sends, each accepted by the broker.
const sender = conn.open_sender({ target: address });
let sent = 0;
let accepted = 0;
sender.on('sendable', () => {
  while (sent < unsettled && sender.sendable()) {
    sender.send({ body: 'm' + sent });
    sent++;
  }
});
sender.on('accepted', () => {
  accepted++;
  if (accepted === unsettled) sendPresettled();
});
sender.on('rejected', (ctx) => fail('rejected: ' + JSON.stringify(ctx.delivery.remote_state)));

// Step 2: pre-settled sends on a link in settle mode "settled".
function sendPresettled() {
  const ps = conn.open_sender({ target: address, snd_settle_mode: 1 });
  let n = 0;
  ps.on('sendable', () => {
    while (n < presettled && ps.sendable()) {
      ps.send({ body: 'p' + n });
      n++;
    }
    if (n === presettled) {
      ps.close();
      receive();
    }
  });
}

// Step 3: receive everything with manual credit (3 more than needed),
// accepting each message, then drain the unused credit.
function receive() {
  const want = [];
  for (let i = 0; i < unsettled; i++) want.push('m' + i);
  for (let i = 0; i < presettled; i++) want.push('p' + i);
  const receiver = conn.open_receiver({ source: address, credit_window: 0, autoaccept: false });
  let got = 0;
  receiver.on('receiver_open', () => receiver.add_credit(total + 3));
  receiver.on('message', (ctx) => {
    if (ctx.message.body !== want[got]) fail('message ' + got + ' is ' + JSON.stringify(ctx.message.body) + ', want ' + want[got]);
    ctx.delivery.accept();
    got++;
    if (got === total) receiver.drain_credit();
    if (got > total) fail('received more messages than were sent');
  });
  receiver.on('receiver_drained', () => {
    if (receiver.credit !== 0) fail('credit after drain is ' + receiver.credit + ', want 0');
    if (got !== total) fail('drained after ' + got + ' messages, want ' + total);
    done = true;
    conn.close();
  });
}

conn.on('connection_close', () => {
  if (!done) fail('connection closed early');
  console.log('OK: ' + total + ' messages sent, received, settled; credit drained');
  process.exit(0);
});
