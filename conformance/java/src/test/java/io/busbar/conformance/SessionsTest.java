package io.busbar.conformance;

import static io.busbar.conformance.Busbar.*;
import static org.junit.jupiter.api.Assertions.*;

import com.azure.core.amqp.exception.AmqpErrorCondition;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.ServiceBusSessionReceiverClient;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.Test;

/** Session receivers: named and next-available sessions, state, locks, order. */
class SessionsTest {

    static ServiceBusSessionReceiverClient sessions(Closer c, String queue) {
        return c.add(builder().sessionReceiver().queueName(queue).disableAutoComplete().buildClient());
    }

    static void sendTo(ServiceBusSenderClient s, String session, String... bodies) {
        for (String b : bodies) {
            s.sendMessage(new ServiceBusMessage(b).setSessionId(session));
        }
    }

    @Test
    void acceptNamedSession() {
        String q = sessionQueue("named");
        try (Closer c = new Closer()) {
            ServiceBusSenderClient s = sender(c, q);
            sendTo(s, "a", "a1", "a2");
            sendTo(s, "b", "b1");
            ServiceBusReceiverClient r = c.add(sessions(c, q).acceptSession("a"));
            assertEquals("a", r.getSessionId());
            List<ServiceBusReceivedMessage> got = receiveN(r, 2);
            assertEquals(List.of("a1", "a2"), bodies(got));
            for (ServiceBusReceivedMessage m : got) {
                assertEquals("a", m.getSessionId());
                r.complete(m);
            }
            assertTrue(receiveUpTo(r, 1, Duration.ofMillis(500)).isEmpty(), "only session a's messages");
            List<ServiceBusReceivedMessage> peeked = new ArrayList<>();
            r.peekMessages(10).forEach(peeked::add);
            assertTrue(peeked.isEmpty(), "peek within the session sees only it: " + bodies(peeked));
        }
    }

    @Test
    void acceptNextSession() {
        String q = sessionQueue("next");
        try (Closer c = new Closer()) {
            sendTo(sender(c, q), "only", "x");
            ServiceBusReceiverClient r = c.add(sessions(c, q).acceptNextSession());
            assertEquals("only", r.getSessionId());
            ServiceBusReceivedMessage m = receiveN(r, 1).get(0);
            assertEquals("x", m.getBody().toString());
            assertEquals("only", m.getSessionId());
            assertTrue(m.getLockedUntil().isAfter(OffsetDateTime.now()), "a session message's locked-until is the session's");
            r.complete(m);
        }
    }

    @Test
    void sessionLockedElsewhere() {
        String q = sessionQueue("locked");
        try (Closer c = new Closer()) {
            sendTo(sender(c, q), "held", "x");
            ServiceBusReceiverClient first = c.add(sessions(c, q).acceptSession("held"));
            assertEquals("held", first.getSessionId());
            ServiceBusSessionReceiverClient other = c.add(builder(CONNECTION_STRING, Duration.ofSeconds(3), 0)
                .sessionReceiver().queueName(q).buildClient());
            assertFailsWithCondition(AmqpErrorCondition.SESSION_CANNOT_BE_LOCKED, () -> other.acceptSession("held"));
        }
    }

    @Test
    void acceptNextSessionNoneAvailable() {
        String q = sessionQueue("none");
        try (Closer c = new Closer()) {
            ServiceBusSessionReceiverClient r = c.add(builder(CONNECTION_STRING, Duration.ofSeconds(4), 0)
                .sessionReceiver().queueName(q).buildClient());
            long start = System.nanoTime();
            // The SDK turns the broker's com.microsoft:timeout into a
            // TimeoutException, reported as an IllegalStateException.
            IllegalStateException e = assertThrows(IllegalStateException.class, r::acceptNextSession);
            Duration took = Duration.ofNanos(System.nanoTime() - start);
            assertInstanceOf(TimeoutException.class, e.getCause(), () -> chain(e));
            assertEquals("com.microsoft:timeout", e.getCause().getMessage());
            // The SDK asks the broker to give up a little before its own
            // 4 s try timeout.
            assertTrue(took.compareTo(Duration.ofSeconds(2)) > 0 && took.compareTo(Duration.ofSeconds(6)) < 0,
                "gave up after " + took + ", want a little less than the 4 s try timeout");
        }
    }

    @Test
    void sessionState() {
        String q = sessionQueue("state");
        try (Closer c = new Closer()) {
            sendTo(sender(c, q), "s", "x");
            ServiceBusSessionReceiverClient sessions = sessions(c, q);
            ServiceBusReceiverClient r = sessions.acceptSession("s");
            assertNull(r.getSessionState(), "a new session has no state");
            r.setSessionState("step 1".getBytes(StandardCharsets.UTF_8));
            assertEquals("step 1", new String(r.getSessionState(), StandardCharsets.UTF_8));
            r.close();
            // Accepted again on another connection: on the same one the SDK
            // can hand back the link it is still closing (it names a
            // session's link after the session and looks links up by name).
            ServiceBusReceiverClient again = c.add(sessions(c, q).acceptSession("s"));
            assertEquals("step 1", new String(again.getSessionState(), StandardCharsets.UTF_8), "the state outlives the receiver");
            again.setSessionState(null);
            assertNull(again.getSessionState(), "setting null clears the state");
        }
    }

    @Test
    void renewSessionLock() throws InterruptedException {
        String q = queue("renew-session", o -> o.setSessionRequired(true).setLockDuration(Duration.ofSeconds(10)));
        try (Closer c = new Closer()) {
            sendTo(sender(c, q), "r", "x");
            ServiceBusReceiverClient r = c.add(sessions(c, q).acceptSession("r"));
            OffsetDateTime first = r.renewSessionLock();
            assertTrue(Math.abs(Duration.between(OffsetDateTime.now().plusSeconds(10), first).toMillis()) < 3000,
                "renewed to " + first + ", want about now plus the 10 s lock duration");
            Thread.sleep(1100);
            OffsetDateTime second = r.renewSessionLock();
            assertTrue(second.isAfter(first), "second renewal " + second + " after " + first);
            ServiceBusReceivedMessage m = receiveN(r, 1).get(0);
            r.complete(m);
        }
    }

    @Test
    void sessionFifoAndAbandonHeadOfLine() {
        String q = sessionQueue("fifo");
        try (Closer c = new Closer()) {
            ServiceBusSenderClient s = sender(c, q);
            List<String> wantA = new ArrayList<>();
            List<String> wantB = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                sendTo(s, "A", "A" + i);
                sendTo(s, "B", "B" + i);
                wantA.add("A" + i);
                wantB.add("B" + i);
            }
            ServiceBusSessionReceiverClient sessions = sessions(c, q);
            for (String id : List.of("A", "B")) {
                ServiceBusReceiverClient r = c.add(sessions.acceptSession(id));
                ServiceBusReceivedMessage head = receiveN(r, 1).get(0);
                r.abandon(head);
                List<ServiceBusReceivedMessage> got = receiveN(r, 10);
                assertEquals(id.equals("A") ? wantA : wantB, bodies(got), "session " + id + " in order, the abandoned one first");
                assertEquals(1, got.get(0).getDeliveryCount());
                got.forEach(r::complete);
            }
        }
    }
}
