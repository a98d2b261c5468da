package io.busbar.conformance;

import static io.busbar.conformance.Busbar.*;
import static org.junit.jupiter.api.Assertions.*;

import com.azure.messaging.servicebus.ServiceBusErrorContext;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusProcessorClient;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Test;

/** ServiceBusProcessorClient, plain and with sessions: handled, completed, failures abandoned. */
class ProcessorTest {

    /** Records the processor's errors other than the ones a handler threw on purpose. */
    static final class Errors {
        final List<String> unexpected = Collections.synchronizedList(new ArrayList<>());

        void on(ServiceBusErrorContext e) {
            Throwable t = e.getException();
            while (t.getCause() != null && !(t instanceof Planned)) {
                t = t.getCause();
            }
            if (!(t instanceof Planned)) {
                unexpected.add(e.getErrorSource() + ": " + e.getException());
            }
        }
    }

    /** The exception a handler throws to fail a message. */
    static final class Planned extends RuntimeException {
        Planned(String m) {
            super(m);
        }
    }

    @Test
    void processor() {
        String q = queue("processor");
        List<String> handled = Collections.synchronizedList(new ArrayList<>());
        Errors errors = new Errors();
        try (Closer c = new Closer()) {
            send(sender(c, q), "fail-once", "p1", "p2", "p3", "p4");
            ServiceBusProcessorClient p = builder().processor().queueName(q).maxConcurrentCalls(1)
                .processMessage(ctx -> {
                    ServiceBusReceivedMessage m = ctx.getMessage();
                    String body = m.getBody().toString();
                    handled.add(body + "#" + m.getDeliveryCount());
                    if (body.equals("fail-once") && m.getDeliveryCount() == 0) {
                        throw new Planned("fail " + body);
                    }
                })
                .processError(errors::on)
                .buildProcessorClient();
            c.add(p::close);
            p.start();
            await(Duration.ofSeconds(20), "the processor handled 6 deliveries: " + handled, () -> handled.size() >= 6);
            // Auto-complete settles each message after its handler returns.
            await(Duration.ofSeconds(10), "the queue is empty", () -> admin().getQueueRuntimeProperties(q).getActiveMessageCount() == 0);
            p.close();
            assertEquals(List.of("fail-once#0", "fail-once#1", "p1#0", "p2#0", "p3#0", "p4#0"), List.copyOf(handled),
                "the failed message is abandoned and comes back first");
            assertEquals(List.of(), errors.unexpected);
        }
    }

    @Test
    void sessionProcessor() {
        String q = sessionQueue("session-processor");
        Map<String, List<String>> handled = new ConcurrentHashMap<>();
        Errors errors = new Errors();
        try (Closer c = new Closer()) {
            ServiceBusSenderClient s = sender(c, q);
            for (int i = 0; i < 5; i++) {
                for (String session : List.of("s1", "s2", "s3")) {
                    s.sendMessage(new ServiceBusMessage(session + "-" + i).setSessionId(session));
                }
            }
            ServiceBusProcessorClient p = builder().sessionProcessor().queueName(q).maxConcurrentSessions(2)
                .sessionIdleTimeout(Duration.ofSeconds(1))
                .processMessage(ctx -> {
                    ServiceBusReceivedMessage m = ctx.getMessage();
                    handled.computeIfAbsent(m.getSessionId(), k -> Collections.synchronizedList(new ArrayList<>()))
                        .add(m.getBody().toString());
                })
                .processError(errors::on)
                .buildProcessorClient();
            c.add(p::close);
            p.start();
            await(Duration.ofSeconds(30), "the session processor handled 15 messages: " + handled,
                () -> handled.values().stream().mapToInt(List::size).sum() >= 15);
            await(Duration.ofSeconds(10), "the queue is empty", () -> admin().getQueueRuntimeProperties(q).getActiveMessageCount() == 0);
            p.close();
            for (String session : List.of("s1", "s2", "s3")) {
                List<String> want = new ArrayList<>();
                for (int i = 0; i < 5; i++) {
                    want.add(session + "-" + i);
                }
                assertEquals(want, List.copyOf(handled.get(session)), "session " + session + " in order, once each");
            }
            assertEquals(List.of(), errors.unexpected);
        }
    }
}
