package io.busbar.conformance;

import static io.busbar.conformance.Busbar.*;
import static org.junit.jupiter.api.Assertions.*;

import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClient;
import com.azure.messaging.servicebus.administration.models.CorrelationRuleFilter;
import com.azure.messaging.servicebus.administration.models.CreateRuleOptions;
import com.azure.messaging.servicebus.administration.models.CreateSubscriptionOptions;
import com.azure.messaging.servicebus.administration.models.FalseRuleFilter;
import com.azure.messaging.servicebus.administration.models.RuleFilter;
import com.azure.messaging.servicebus.administration.models.SqlRuleAction;
import com.azure.messaging.servicebus.administration.models.SqlRuleFilter;
import com.azure.messaging.servicebus.administration.models.TrueRuleFilter;
import com.azure.messaging.servicebus.models.DeadLetterOptions;
import com.azure.messaging.servicebus.models.SubQueue;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Topics: a publish reaches the subscriptions whose rules match it. */
class TopicsTest {

    /** Creates subscription sub of topic with exactly these rules (the first replaces $Default). */
    static void subscription(String topic, String sub, CreateRuleOptions... rules) {
        ServiceBusAdministrationClient a = admin();
        a.createSubscription(topic, sub, "r0", new CreateSubscriptionOptions(), rules[0]);
        for (int i = 1; i < rules.length; i++) {
            a.createRule(topic, "r" + i, sub, rules[i]); // (topic, rule, subscription): the SDK's order
        }
    }

    static CreateRuleOptions rule(RuleFilter f) {
        return new CreateRuleOptions(f);
    }

    static CorrelationRuleFilter correlation(Map<String, Object> props) {
        CorrelationRuleFilter f = new CorrelationRuleFilter();
        f.getProperties().putAll(props);
        return f;
    }

    @Test
    void filtersAndActions() {
        String topic = unique("filters");
        admin().createTopic(topic);
        subscription(topic, "all", rule(new TrueRuleFilter()));
        subscription(topic, "none", rule(new FalseRuleFilter()));
        subscription(topic, "sql", rule(new SqlRuleFilter("color = 'red' AND size > 2")));
        CorrelationRuleFilter bySubject = correlation(Map.of("color", "red"));
        bySubject.setLabel("order");
        subscription(topic, "correlation", rule(bySubject));
        subscription(topic, "by-correlation-id", rule(new CorrelationRuleFilter("corr-1")));
        subscription(topic, "either", rule(new SqlRuleFilter("color = 'red'")), rule(new SqlRuleFilter("size > 2")));
        subscription(topic, "action", new CreateRuleOptions(new TrueRuleFilter())
            .setAction(new SqlRuleAction("SET sys.Label = 'changed'; SET added = 'yes'; REMOVE size")));

        try (Closer c = new Closer()) {
            var sender = c.add(builder().sender().topicName(topic).buildClient());
            ServiceBusMessage m = new ServiceBusMessage("red-big").setSubject("order").setCorrelationId("corr-1");
            m.getApplicationProperties().put("color", "red");
            m.getApplicationProperties().put("size", 3);
            sender.sendMessage(m);
            ServiceBusMessage other = new ServiceBusMessage("blue-small").setSubject("order");
            other.getApplicationProperties().put("color", "blue");
            other.getApplicationProperties().put("size", 1);
            sender.sendMessage(other);

            Map<String, List<String>> want = Map.of(
                "all", List.of("red-big", "blue-small"),
                "none", List.of(),
                "sql", List.of("red-big"),
                "correlation", List.of("red-big"),
                "by-correlation-id", List.of("red-big"),
                "either", List.of("red-big"),
                "action", List.of("red-big", "blue-small"));
            for (var e : want.entrySet()) {
                ServiceBusReceiverClient r = c.add(builder().receiver().topicName(topic).subscriptionName(e.getKey())
                    .disableAutoComplete().buildClient());
                List<ServiceBusReceivedMessage> got = e.getValue().isEmpty()
                    ? receiveUpTo(r, 5, Duration.ofMillis(500))
                    : receiveN(r, e.getValue().size());
                assertEquals(e.getValue(), bodies(got), "subscription " + e.getKey());
                if (!got.isEmpty()) {
                    assertTrue(receiveUpTo(r, 5, Duration.ofMillis(300)).isEmpty(), "subscription " + e.getKey() + " has one copy each");
                }
                if (e.getKey().equals("action")) {
                    for (ServiceBusReceivedMessage x : got) {
                        assertEquals("changed", x.getSubject());
                        assertEquals("yes", x.getApplicationProperties().get("added"));
                        assertFalse(x.getApplicationProperties().containsKey("size"), "REMOVE size");
                    }
                } else if (e.getKey().equals("all")) {
                    assertEquals("order", got.get(0).getSubject(), "the action changes its subscription's copy only");
                    assertEquals(3, got.get(0).getApplicationProperties().get("size"));
                }
            }
        }
    }

    @Test
    void subscriptionPeekDeadLetterAndCounts() {
        String topic = unique("sub-dlq");
        admin().createTopic(topic);
        admin().createSubscription(topic, "sub");
        try (Closer c = new Closer()) {
            var sender = c.add(builder().sender().topicName(topic).buildClient());
            sender.sendMessage(new ServiceBusMessage("one"));
            sender.sendMessage(new ServiceBusMessage("two"));
            ServiceBusReceiverClient r = c.add(builder().receiver().topicName(topic).subscriptionName("sub")
                .disableAutoComplete().buildClient());
            List<ServiceBusReceivedMessage> peeked = new ArrayList<>();
            r.peekMessages(10).forEach(peeked::add);
            assertEquals(List.of("one", "two"), bodies(peeked));
            ServiceBusReceivedMessage m = receiveN(r, 1).get(0);
            r.deadLetter(m, new DeadLetterOptions().setDeadLetterReason("NotWanted"));
            var counts = admin().getSubscriptionRuntimeProperties(topic, "sub");
            assertEquals(1, counts.getActiveMessageCount());
            assertEquals(1, counts.getDeadLetterMessageCount());
            assertEquals(2, counts.getTotalMessageCount());
            ServiceBusReceiverClient dlq = c.add(builder().receiver().topicName(topic).subscriptionName("sub")
                .subQueue(SubQueue.DEAD_LETTER_QUEUE).disableAutoComplete().buildClient());
            ServiceBusReceivedMessage d = receiveN(dlq, 1).get(0);
            assertEquals("one", d.getBody().toString());
            assertEquals("NotWanted", d.getDeadLetterReason());
            dlq.complete(d);
            assertEquals(0, admin().getSubscriptionRuntimeProperties(topic, "sub").getDeadLetterMessageCount());
        }
    }
}
