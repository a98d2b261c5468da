package io.busbar.conformance;

import static io.busbar.conformance.Busbar.*;
import static org.junit.jupiter.api.Assertions.*;

import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClient;
import com.azure.messaging.servicebus.administration.models.CorrelationRuleFilter;
import com.azure.messaging.servicebus.administration.models.CreateRuleOptions;
import com.azure.messaging.servicebus.administration.models.CreateSubscriptionOptions;
import com.azure.messaging.servicebus.administration.models.SqlRuleFilter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Seed 000, "Sagas with Azure Service Bus": an order saga on a
 * session-enabled subscription, the order id being the session id. The saga
 * keeps its progress in the session state; its first message schedules a
 * Timeout that compensates when the shipment never came; the state is
 * cleared when the saga ends.
 */
class SeedSagaTest {

    static final String SUB = "orchestrator";
    /** How long after its first message the saga gives up (the seed's 5 s, shortened). */
    static final Duration SAGA_TIMEOUT = Duration.ofSeconds(2);

    static ServiceBusMessage orderMessage(String order, String type, String body) {
        ServiceBusMessage m = new ServiceBusMessage(body).setSessionId(order).setCorrelationId(order);
        m.getApplicationProperties().put("MessageType", type);
        return m;
    }

    static CorrelationRuleFilter messageType(String type) {
        CorrelationRuleFilter f = new CorrelationRuleFilter();
        f.getProperties().put("MessageType", type);
        return f;
    }

    @Test
    void saga() throws Exception {
        ServiceBusAdministrationClient a = admin();
        String topic = unique("orchestration");
        a.createTopic(topic);
        a.createSubscription(topic, SUB, "PaymentAccepted", new CreateSubscriptionOptions().setSessionRequired(true),
            new CreateRuleOptions(messageType("PaymentAccepted")));
        a.createRule(topic, "ItemShipped", SUB, new CreateRuleOptions(new SqlRuleFilter("MessageType = 'ItemShipped'")));
        a.createRule(topic, "Timeout", SUB, new CreateRuleOptions(messageType("Timeout")));

        String happy = unique("order-happy");
        String unhappy = unique("order-unhappy");
        SessionWorkers.Log log = new SessionWorkers.Log();
        try (Closer c = new Closer()) {
            ServiceBusSenderClient publisher = c.add(builder().sender().topicName(topic).buildClient());
            SessionWorkers.Handler handle = (session, m) -> {
                String order = session.getSessionId();
                String kind = (String) m.getApplicationProperties().get("MessageType");
                byte[] raw = session.getSessionState();
                boolean started = raw != null;
                // The state: "paid,shipped" flags, as "true,false".
                String[] st = started ? new String(raw, StandardCharsets.UTF_8).split(",") : new String[] {"false", "false"};
                boolean paid = Boolean.parseBoolean(st[0]);
                boolean shipped = Boolean.parseBoolean(st[1]);
                switch (kind) {
                    case "PaymentAccepted", "ItemShipped" -> {
                        if (!started) {
                            // The first message of the saga schedules its timeout.
                            publisher.scheduleMessage(orderMessage(order, "Timeout", "check " + order), OffsetDateTime.now().plus(SAGA_TIMEOUT));
                        }
                        if (kind.equals("PaymentAccepted")) {
                            paid = true;
                        } else {
                            shipped = true;
                        }
                        log.add(order, kind);
                        if (paid && shipped) {
                            log.add(order, "completed");
                            session.setSessionState(null);
                        } else {
                            session.setSessionState((paid + "," + shipped).getBytes(StandardCharsets.UTF_8));
                        }
                    }
                    case "Timeout" -> {
                        if (!started) {
                            log.add(order, "timeout discarded");
                        } else {
                            log.add(order, "compensated (payment " + paid + ", shipment " + shipped + ")");
                            session.setSessionState(null);
                        }
                    }
                    default -> log.add(order, "unexpected " + kind);
                }
                session.complete(m);
            };

            // The happy order: payment now, shipment one second later
            // (scheduled, as the seed's Shipping service does), and an audit
            // message no rule of the orchestrator matches.
            publisher.sendMessage(orderMessage(happy, "PaymentAccepted", "Payment OK"));
            publisher.sendMessage(orderMessage(happy, "Audit", "not for the saga"));
            publisher.scheduleMessage(orderMessage(happy, "ItemShipped", "Shipping OK"), OffsetDateTime.now().plusSeconds(1));
            // The unhappy order: payment only.
            publisher.sendMessage(orderMessage(unhappy, "PaymentAccepted", "Payment OK"));

            SessionWorkers.run(b -> b.sessionReceiver().topicName(topic).subscriptionName(SUB).disableAutoComplete().buildClient(),
                handle, 2, Duration.ofSeconds(1),
                () -> finished(log.last(happy)) && finished(log.last(unhappy)), Duration.ofSeconds(45), log);

            assertEquals(List.of("PaymentAccepted", "ItemShipped", "completed", "timeout discarded"), log.get(happy), "order " + happy);
            assertEquals(List.of("PaymentAccepted", "compensated (payment true, shipment false)"), log.get(unhappy), "order " + unhappy);
            // Both sagas cleared their state, and nothing is left (the audit
            // message matched no rule).
            for (String order : List.of(happy, unhappy)) {
                ServiceBusReceiverClient r = c.add(c.add(builder().sessionReceiver().topicName(topic).subscriptionName(SUB)
                    .buildClient()).acceptSession(order));
                assertNull(r.getSessionState(), "order " + order + ": the saga cleared its state");
                List<ServiceBusReceivedMessage> left = new ArrayList<>();
                r.peekMessages(10).forEach(left::add);
                assertEquals(List.of(), bodies(left), "order " + order + ": nothing left");
            }
        }
    }

    static boolean finished(String last) {
        return last.equals("timeout discarded") || last.startsWith("compensated");
    }
}
