package io.busbar.conformance;

import static io.busbar.conformance.Busbar.*;
import static org.junit.jupiter.api.Assertions.*;

import com.azure.messaging.servicebus.ServiceBusFailureReason;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusMessageBatch;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.models.AbandonOptions;
import com.azure.messaging.servicebus.models.DeadLetterOptions;
import com.azure.messaging.servicebus.models.ServiceBusMessageState;
import com.azure.messaging.servicebus.models.ServiceBusReceiveMode;
import com.azure.messaging.servicebus.models.SubQueue;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Date;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/** Sending, receiving in both modes, settling, peeking and locks on queues. */
class MessagingTest {

    @Test
    void sendReceivePeekLockComplete() {
        String q = queue("send");
        try (Closer c = new Closer()) {
            sender(c, q).sendMessage(new ServiceBusMessage("hello"));
            ServiceBusReceiverClient r = receiver(c, q);
            ServiceBusReceivedMessage m = receiveN(r, 1).get(0);
            OffsetDateTime now = OffsetDateTime.now();
            assertEquals("hello", m.getBody().toString());
            // The Java SDK shows the AMQP header's delivery-count as it is:
            // the number of earlier deliveries (Go and .NET add one).
            assertEquals(0, m.getDeliveryCount());
            assertTrue(m.getSequenceNumber() > 0, "sequence number " + m.getSequenceNumber());
            assertTrue(Math.abs(ChronoUnit.SECONDS.between(m.getEnqueuedTime(), now)) < 30, "enqueued " + m.getEnqueuedTime());
            assertTrue(m.getLockedUntil().isAfter(now), "locked until " + m.getLockedUntil());
            assertNotNull(m.getLockToken());
            assertNotNull(m.getMessageId(), "the broker assigns a message id");
            assertEquals(ServiceBusMessageState.ACTIVE, m.getState());
            r.complete(m);
            assertTrue(receiveUpTo(r, 1, Duration.ofSeconds(1)).isEmpty(), "the queue is empty after complete");
            assertNull(r.peekMessage(), "nothing to peek after complete");
        }
    }

    @Test
    void receiveAndDelete() {
        String q = queue("receive-and-delete");
        try (Closer c = new Closer()) {
            send(sender(c, q), "a", "b", "c");
            ServiceBusReceiverClient r = c.add(builder().receiver().queueName(q)
                .receiveMode(ServiceBusReceiveMode.RECEIVE_AND_DELETE).buildClient());
            List<ServiceBusReceivedMessage> got = receiveN(r, 3);
            assertEquals(List.of("a", "b", "c"), bodies(got));
            assertNull(r.peekMessage(), "ReceiveAndDelete leaves the queue empty");
        }
    }

    @Test
    void sendBatch() {
        String q = queue("batch");
        try (Closer c = new Closer()) {
            ServiceBusSenderClient s = sender(c, q);
            ServiceBusMessageBatch batch = s.createMessageBatch();
            List<String> want = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                want.add("m" + i);
                assertTrue(batch.tryAddMessage(new ServiceBusMessage("m" + i)));
            }
            s.sendMessages(batch);
            // A list of messages is sent as one batch too.
            s.sendMessages(List.of(new ServiceBusMessage("m10"), new ServiceBusMessage("m11")));
            want.add("m10");
            want.add("m11");
            List<ServiceBusReceivedMessage> got = receiveN(receiver(c, q), 12);
            assertEquals(want, bodies(got));
            for (int i = 1; i < got.size(); i++) {
                assertTrue(got.get(i).getSequenceNumber() > got.get(i - 1).getSequenceNumber(), "sequence numbers increase");
            }
        }
    }

    @Test
    void scheduleAndCancel() {
        String q = queue("schedule");
        try (Closer c = new Closer()) {
            ServiceBusSenderClient s = sender(c, q);
            OffsetDateTime at = OffsetDateTime.now().plusHours(1).truncatedTo(ChronoUnit.SECONDS);
            long keep = s.scheduleMessage(new ServiceBusMessage("keep"), at);
            long cancel = s.scheduleMessage(new ServiceBusMessage("cancel"), at);
            assertNotEquals(keep, cancel);
            ServiceBusReceiverClient r = receiver(c, q);
            List<ServiceBusReceivedMessage> peeked = peekAll(r);
            assertEquals(List.of("keep", "cancel"), bodies(peeked));
            for (ServiceBusReceivedMessage m : peeked) {
                assertEquals(ServiceBusMessageState.SCHEDULED, m.getState());
                assertEquals(at.toInstant(), m.getScheduledEnqueueTime().toInstant());
                assertEquals(0, m.getDeliveryCount());
            }
            assertEquals(keep, peeked.get(0).getSequenceNumber());
            s.cancelScheduledMessage(cancel);
            assertEquals(List.of("keep"), bodies(peekAll(r)));
            assertEquals(1, admin().getQueueRuntimeProperties(q).getScheduledMessageCount());
            // Several at once.
            List<Long> seqs = new ArrayList<>();
            s.scheduleMessages(List.of(new ServiceBusMessage("s1"), new ServiceBusMessage("s2")), at).forEach(seqs::add);
            assertEquals(2, seqs.size());
            assertTrue(seqs.get(1) > seqs.get(0), "sequence numbers " + seqs);
            s.cancelScheduledMessages(seqs);
            assertEquals(List.of("keep"), bodies(peekAll(r)));
        }
    }

    @Test
    void scheduledDelivery() {
        String q = queue("scheduled-delivery");
        try (Closer c = new Closer()) {
            ServiceBusSenderClient s = sender(c, q);
            OffsetDateTime at = OffsetDateTime.now().plusSeconds(2);
            s.scheduleMessage(new ServiceBusMessage("scheduled"), at);
            s.sendMessage(new ServiceBusMessage("enqueue-time").setScheduledEnqueueTime(at));
            ServiceBusReceiverClient r = receiver(c, q);
            List<ServiceBusReceivedMessage> got = new ArrayList<>();
            long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
            while (got.size() < 2 && System.nanoTime() < deadline) {
                for (ServiceBusReceivedMessage m : r.receiveMessages(2 - got.size(), Duration.ofSeconds(1))) {
                    assertFalse(OffsetDateTime.now().isBefore(at.minus(Duration.ofMillis(100))),
                        "message " + m.getBody() + " arrived before its time " + at);
                    got.add(m);
                }
            }
            assertEquals(List.of("scheduled", "enqueue-time"), bodies(got));
        }
    }

    @Test
    void messagePropertiesRoundTrip() {
        String q = queue("properties");
        try (Closer c = new Closer()) {
            Date when = new Date(1_700_000_000_000L);
            UUID uuid = UUID.randomUUID();
            ServiceBusMessage out = new ServiceBusMessage("props")
                .setMessageId("message-id").setContentType("application/json").setCorrelationId("correlation")
                .setPartitionKey("partition").setReplyTo("reply-to").setReplyToSessionId("reply-session")
                .setSubject("subject").setTo("to").setTimeToLive(Duration.ofMinutes(10));
            Map<String, Object> props = out.getApplicationProperties();
            props.put("string", "s");
            props.put("int", 42);
            props.put("long", 1L << 40);
            props.put("double", 2.5);
            props.put("bool", true);
            props.put("short", (short) 7);
            props.put("date", when);
            props.put("uuid", uuid);
            sender(c, q).sendMessage(out);
            ServiceBusReceivedMessage m = receiveN(receiver(c, q), 1).get(0);
            assertEquals("message-id", m.getMessageId());
            assertEquals("application/json", m.getContentType());
            assertEquals("correlation", m.getCorrelationId());
            assertEquals("partition", m.getPartitionKey());
            assertEquals("reply-to", m.getReplyTo());
            assertEquals("reply-session", m.getReplyToSessionId());
            assertEquals("subject", m.getSubject());
            assertEquals("to", m.getTo());
            assertEquals(Duration.ofMinutes(10), m.getTimeToLive());
            assertEquals(m.getEnqueuedTime().plus(Duration.ofMinutes(10)).toInstant(), m.getExpiresAt().toInstant());
            Map<String, Object> got = m.getApplicationProperties();
            assertEquals("s", got.get("string"));
            assertEquals(42, got.get("int"));
            assertEquals(1L << 40, got.get("long"));
            assertEquals(2.5, got.get("double"));
            assertEquals(true, got.get("bool"));
            assertEquals((short) 7, got.get("short"));
            assertEquals(when, got.get("date"));
            assertEquals(uuid, got.get("uuid"));
        }
    }

    @Test
    void largeMessage() {
        String q = queue("large");
        try (Closer c = new Closer()) {
            byte[] body = new byte[1_000_000];
            new Random(19).nextBytes(body);
            sender(c, q).sendMessage(new ServiceBusMessage(body));
            ServiceBusReceivedMessage m = receiveN(receiver(c, q), 1).get(0);
            assertArrayEquals(body, m.getBody().toBytes());
        }
    }

    @Test
    void abandonWithProperties() {
        String q = queue("abandon");
        try (Closer c = new Closer()) {
            send(sender(c, q), "again");
            ServiceBusReceiverClient r = receiver(c, q);
            ServiceBusReceivedMessage m = receiveN(r, 1).get(0);
            r.abandon(m, new AbandonOptions().setPropertiesToModify(Map.of("reason", "busy", "attempt", 1)));
            ServiceBusReceivedMessage again = receiveN(r, 1).get(0);
            assertEquals("again", again.getBody().toString());
            assertEquals(1, again.getDeliveryCount(), "an abandon counts a delivery");
            assertEquals("busy", again.getApplicationProperties().get("reason"));
            assertEquals(1, again.getApplicationProperties().get("attempt"));
            r.complete(again);
        }
    }

    @Test
    void deferAndReceiveDeferred() {
        String q = queue("defer");
        try (Closer c = new Closer()) {
            send(sender(c, q), "deferred", "next");
            ServiceBusReceiverClient r = receiver(c, q);
            ServiceBusReceivedMessage m = receiveN(r, 1).get(0);
            assertEquals("deferred", m.getBody().toString());
            r.defer(m);
            ServiceBusReceivedMessage next = receiveN(r, 1).get(0);
            assertEquals("next", next.getBody().toString(), "a deferred message leaves the delivery order");
            r.complete(next);
            ServiceBusReceivedMessage peeked = r.peekMessage(m.getSequenceNumber());
            assertEquals(ServiceBusMessageState.DEFERRED, peeked.getState());
            ServiceBusReceivedMessage d = r.receiveDeferredMessage(m.getSequenceNumber());
            assertEquals("deferred", d.getBody().toString());
            assertEquals(ServiceBusMessageState.DEFERRED, d.getState());
            assertEquals(1, d.getDeliveryCount(), "receiving a deferred message is a delivery");
            assertTrue(d.getLockedUntil().isAfter(OffsetDateTime.now()));
            r.complete(d);
            assertNull(r.peekMessage(), "the queue is empty");
            // Several at once.
            send(sender(c, q), "d1", "d2");
            List<ServiceBusReceivedMessage> two = receiveN(r, 2);
            two.forEach(r::defer);
            List<ServiceBusReceivedMessage> back = new ArrayList<>();
            r.receiveDeferredMessageBatch(Arrays.asList(two.get(0).getSequenceNumber(), two.get(1).getSequenceNumber())).forEach(back::add);
            assertEquals(List.of("d1", "d2"), bodies(back));
            back.forEach(r::complete);
        }
    }

    @Test
    void deadLetterAndTheDeadLetterQueue() {
        String q = queue("dead-letter");
        try (Closer c = new Closer()) {
            send(sender(c, q), "poison");
            ServiceBusReceiverClient r = receiver(c, q);
            ServiceBusReceivedMessage m = receiveN(r, 1).get(0);
            r.deadLetter(m, new DeadLetterOptions().setDeadLetterReason("BadInput").setDeadLetterErrorDescription("cannot parse")
                .setPropertiesToModify(Map.of("checked", true)));
            assertNull(r.peekMessage(), "the message left the queue");
            assertEquals(1, admin().getQueueRuntimeProperties(q).getDeadLetterMessageCount());
            ServiceBusReceiverClient dlq = c.add(builder().receiver().queueName(q).subQueue(SubQueue.DEAD_LETTER_QUEUE)
                .disableAutoComplete().buildClient());
            ServiceBusReceivedMessage d = receiveN(dlq, 1).get(0);
            assertEquals("poison", d.getBody().toString());
            assertEquals("BadInput", d.getDeadLetterReason());
            assertEquals("cannot parse", d.getDeadLetterErrorDescription());
            assertEquals(true, d.getApplicationProperties().get("checked"));
            assertEquals(m.getSequenceNumber(), d.getSequenceNumber());
            dlq.complete(d);
            assertNull(dlq.peekMessage(), "the dead-letter queue is empty");
        }
    }

    @Test
    void peek() {
        String q = queue("peek");
        try (Closer c = new Closer()) {
            send(sender(c, q), "p1", "p2", "p3", "p4");
            ServiceBusReceiverClient r = receiver(c, q);
            ServiceBusReceivedMessage first = r.peekMessage();
            assertEquals("p1", first.getBody().toString());
            assertNull(first.getLockToken(), "a peeked message has no lock");
            assertEquals(0, first.getDeliveryCount());
            List<ServiceBusReceivedMessage> next = new ArrayList<>();
            r.peekMessages(2).forEach(next::add);
            assertEquals(List.of("p2", "p3"), bodies(next), "peek continues where it stopped");
            List<ServiceBusReceivedMessage> from = new ArrayList<>();
            r.peekMessages(10, first.getSequenceNumber() + 1).forEach(from::add);
            assertEquals(List.of("p2", "p3", "p4"), bodies(from));
            ServiceBusReceivedMessage m = receiveN(r, 1).get(0);
            assertEquals("p1", m.getBody().toString());
            assertEquals(0, m.getDeliveryCount(), "peeking is not a delivery");
        }
    }

    @Test
    void renewMessageLock() throws InterruptedException {
        String q = queue("renew", o -> o.setLockDuration(Duration.ofSeconds(5)));
        try (Closer c = new Closer()) {
            send(sender(c, q), "renew");
            ServiceBusReceiverClient r = c.add(builder().receiver().queueName(q).disableAutoComplete()
                .maxAutoLockRenewDuration(Duration.ZERO).buildClient());
            ServiceBusReceivedMessage m = receiveN(r, 1).get(0);
            OffsetDateTime first = m.getLockedUntil();
            OffsetDateTime renewed = first;
            // Renew past the original lock's end.
            while (OffsetDateTime.now().isBefore(first.plusSeconds(2))) {
                Thread.sleep(1500);
                OffsetDateTime next = r.renewMessageLock(m);
                assertTrue(next.isAfter(renewed), "renewed lock " + next + " after " + renewed);
                renewed = next;
            }
            r.complete(m);
            assertNull(r.peekMessage());
        }
    }

    @Test
    void lockExpiry() {
        String q = queue("lock-expiry", o -> o.setLockDuration(Duration.ofSeconds(5)));
        try (Closer c = new Closer()) {
            send(sender(c, q), "expires");
            ServiceBusReceiverClient r = c.add(builder().receiver().queueName(q).disableAutoComplete()
                .maxAutoLockRenewDuration(Duration.ZERO).buildClient());
            ServiceBusReceivedMessage m = receiveN(r, 1).get(0);
            // Nothing until the lock expires, then the message again.
            List<ServiceBusReceivedMessage> again = new ArrayList<>();
            long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
            while (again.isEmpty() && System.nanoTime() < deadline) {
                r.receiveMessages(1, Duration.ofSeconds(1)).forEach(again::add);
            }
            assertEquals(1, again.size(), "redelivered after the lock expired");
            ServiceBusReceivedMessage m2 = again.get(0);
            assertFalse(OffsetDateTime.now().isBefore(m.getLockedUntil().minus(Duration.ofMillis(100))), "redelivered before the lock expired");
            assertEquals(1, m2.getDeliveryCount(), "an expired lock counts a delivery");
            assertEquals(m.getSequenceNumber(), m2.getSequenceNumber());
            assertFailsWith(ServiceBusFailureReason.MESSAGE_LOCK_LOST, () -> r.complete(m));
            r.complete(m2);
        }
    }

    @Test
    void maxDeliveryCount() {
        String q = queue("max-delivery", o -> o.setMaxDeliveryCount(2));
        try (Closer c = new Closer()) {
            send(sender(c, q), "doomed");
            ServiceBusReceiverClient r = receiver(c, q);
            for (int i = 0; i < 2; i++) {
                ServiceBusReceivedMessage m = receiveN(r, 1).get(0);
                assertEquals(i, m.getDeliveryCount());
                r.abandon(m);
            }
            assertTrue(receiveUpTo(r, 1, Duration.ofSeconds(1)).isEmpty());
            ServiceBusReceiverClient dlq = c.add(builder().receiver().queueName(q).subQueue(SubQueue.DEAD_LETTER_QUEUE)
                .receiveMode(ServiceBusReceiveMode.RECEIVE_AND_DELETE).buildClient());
            ServiceBusReceivedMessage d = receiveN(dlq, 1).get(0);
            assertEquals("doomed", d.getBody().toString());
            assertEquals("MaxDeliveryCountExceeded", d.getDeadLetterReason());
        }
    }
}
