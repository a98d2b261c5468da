package io.busbar.conformance;

import static io.busbar.conformance.Busbar.*;
import static org.junit.jupiter.api.Assertions.*;

import com.azure.core.exception.ResourceExistsException;
import com.azure.core.exception.ResourceNotFoundException;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClient;
import com.azure.messaging.servicebus.administration.models.AccessRights;
import com.azure.messaging.servicebus.administration.models.AuthorizationRule;
import com.azure.messaging.servicebus.administration.models.CorrelationRuleFilter;
import com.azure.messaging.servicebus.administration.models.CreateQueueOptions;
import com.azure.messaging.servicebus.administration.models.CreateRuleOptions;
import com.azure.messaging.servicebus.administration.models.CreateSubscriptionOptions;
import com.azure.messaging.servicebus.administration.models.CreateTopicOptions;
import com.azure.messaging.servicebus.administration.models.EntityStatus;
import com.azure.messaging.servicebus.administration.models.QueueProperties;
import com.azure.messaging.servicebus.administration.models.QueueRuntimeProperties;
import com.azure.messaging.servicebus.administration.models.RuleProperties;
import com.azure.messaging.servicebus.administration.models.SharedAccessAuthorizationRule;
import com.azure.messaging.servicebus.administration.models.SqlRuleAction;
import com.azure.messaging.servicebus.administration.models.SqlRuleFilter;
import com.azure.messaging.servicebus.administration.models.SubscriptionProperties;
import com.azure.messaging.servicebus.administration.models.SubscriptionRuntimeProperties;
import com.azure.messaging.servicebus.administration.models.TopicProperties;
import com.azure.messaging.servicebus.administration.models.TopicRuntimeProperties;
import com.azure.messaging.servicebus.administration.models.TrueRuleFilter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import org.junit.jupiter.api.Test;

/** ServiceBusAdministrationClient: every entity kind's life cycle and runtime counts. */
class AdminTest {

    @Test
    void queueLifeCycle() {
        ServiceBusAdministrationClient a = admin();
        String name = unique("admin-queue");
        QueueProperties created = a.createQueue(name, new CreateQueueOptions()
            .setLockDuration(Duration.ofSeconds(45)).setMaxDeliveryCount(7).setSessionRequired(true)
            .setDefaultMessageTimeToLive(Duration.ofDays(1)).setDeadLetteringOnMessageExpiration(true)
            .setDuplicateDetectionRequired(true).setDuplicateDetectionHistoryTimeWindow(Duration.ofMinutes(2))
            .setUserMetadata("made by the Java suite"));
        assertEquals(name, created.getName());
        assertEquals(Duration.ofSeconds(45), created.getLockDuration());
        assertEquals(7, created.getMaxDeliveryCount());
        assertTrue(created.isSessionRequired());
        assertEquals(Duration.ofDays(1), created.getDefaultMessageTimeToLive());
        assertTrue(created.isDeadLetteringOnMessageExpiration());
        assertTrue(created.isDuplicateDetectionRequired());
        assertEquals(Duration.ofMinutes(2), created.getDuplicateDetectionHistoryTimeWindow());
        assertEquals("made by the Java suite", created.getUserMetadata());
        assertEquals(EntityStatus.ACTIVE, created.getStatus());

        assertThrows(ResourceExistsException.class, () -> a.createQueue(name));
        assertTrue(a.getQueueExists(name));
        QueueProperties got = a.getQueue(name);
        assertEquals(7, got.getMaxDeliveryCount());
        assertEquals(Duration.ofSeconds(45), got.getLockDuration());

        got.setMaxDeliveryCount(3).setLockDuration(Duration.ofSeconds(20)).setUserMetadata("updated");
        QueueProperties updated = a.updateQueue(got);
        assertEquals(3, updated.getMaxDeliveryCount());
        assertEquals(Duration.ofSeconds(20), updated.getLockDuration());
        assertEquals("updated", a.getQueue(name).getUserMetadata());
        assertEquals(3, a.getQueue(name).getMaxDeliveryCount());

        List<String> names = new ArrayList<>();
        a.listQueues().forEach(q -> names.add(q.getName()));
        assertTrue(names.contains(name), "listQueues has " + name);

        a.deleteQueue(name);
        assertFalse(a.getQueueExists(name));
        assertThrows(ResourceNotFoundException.class, () -> a.getQueue(name));
        assertThrows(ResourceNotFoundException.class, () -> a.deleteQueue(name));
    }

    @Test
    void queueRuntimeProperties() {
        String q = queue("admin-runtime");
        try (Closer c = new Closer()) {
            ServiceBusSenderClient s = sender(c, q);
            send(s, "a", "b", "c");
            s.scheduleMessage(new ServiceBusMessage("later"), OffsetDateTime.now().plusHours(1));
            ServiceBusReceiverClient r = receiver(c, q);
            r.deadLetter(receiveN(r, 1).get(0));
            QueueRuntimeProperties p = admin().getQueueRuntimeProperties(q);
            assertEquals(q, p.getName());
            assertEquals(2, p.getActiveMessageCount());
            assertEquals(1, p.getDeadLetterMessageCount());
            assertEquals(1, p.getScheduledMessageCount());
            assertEquals(4, p.getTotalMessageCount());
            assertTrue(p.getSizeInBytes() > 0, "size " + p.getSizeInBytes());
            assertNotNull(p.getCreatedAt());
        }
    }

    @Test
    void topicSubscriptionAndRuleLifeCycle() {
        ServiceBusAdministrationClient a = admin();
        String topic = unique("admin-topic");
        TopicProperties t = a.createTopic(topic, new CreateTopicOptions()
            .setDefaultMessageTimeToLive(Duration.ofHours(2)).setMaxSizeInMegabytes(2048));
        assertEquals(topic, t.getName());
        assertEquals(Duration.ofHours(2), t.getDefaultMessageTimeToLive());
        assertTrue(a.getTopicExists(topic));
        t.setDefaultMessageTimeToLive(Duration.ofHours(3));
        assertEquals(Duration.ofHours(3), a.updateTopic(t).getDefaultMessageTimeToLive());
        assertEquals(Duration.ofHours(3), a.getTopic(topic).getDefaultMessageTimeToLive());
        List<String> topics = new ArrayList<>();
        a.listTopics().forEach(x -> topics.add(x.getName()));
        assertTrue(topics.contains(topic));

        SubscriptionProperties sub = a.createSubscription(topic, "sub", new CreateSubscriptionOptions()
            .setMaxDeliveryCount(4).setLockDuration(Duration.ofSeconds(30)));
        assertEquals("sub", sub.getSubscriptionName());
        assertEquals(topic, sub.getTopicName());
        assertEquals(4, sub.getMaxDeliveryCount());
        assertTrue(a.getSubscriptionExists(topic, "sub"));
        sub.setMaxDeliveryCount(9);
        assertEquals(9, a.updateSubscription(sub).getMaxDeliveryCount());
        assertEquals(9, a.getSubscription(topic, "sub").getMaxDeliveryCount());
        a.createSubscription(topic, "second", "only-red", new CreateSubscriptionOptions(),
            new CreateRuleOptions(new SqlRuleFilter("color = 'red'")));
        List<String> subs = new ArrayList<>();
        a.listSubscriptions(topic).forEach(x -> subs.add(x.getSubscriptionName()));
        assertEquals(List.of("second", "sub"), subs.stream().sorted().toList());

        // Rules: $Default, then one of each kind.
        List<String> rules = new ArrayList<>();
        a.listRules(topic, "sub").forEach(r -> rules.add(r.getName()));
        assertEquals(List.of("$Default"), rules);
        assertInstanceOf(TrueRuleFilter.class, a.getRule(topic, "sub", "$Default").getFilter());
        RuleProperties sql = a.createRule(topic, "sql", "sub", new CreateRuleOptions(new SqlRuleFilter("size > 2"))
            .setAction(new SqlRuleAction("SET checked = 1")));
        assertEquals("size > 2", ((SqlRuleFilter) sql.getFilter()).getSqlExpression());
        assertEquals("SET checked = 1", ((SqlRuleAction) sql.getAction()).getSqlExpression());
        CorrelationRuleFilter cf = new CorrelationRuleFilter("corr").setLabel("subject");
        cf.getProperties().put("color", "red");
        a.createRule(topic, "correlation", "sub", new CreateRuleOptions(cf));
        CorrelationRuleFilter gotCf = (CorrelationRuleFilter) a.getRule(topic, "sub", "correlation").getFilter();
        assertEquals("corr", gotCf.getCorrelationId());
        assertEquals("subject", gotCf.getLabel());
        assertEquals("red", gotCf.getProperties().get("color"));
        RuleProperties toUpdate = a.getRule(topic, "sub", "sql");
        toUpdate.setFilter(new SqlRuleFilter("size > 5"));
        assertEquals("size > 5", ((SqlRuleFilter) a.updateRule(topic, "sub", toUpdate).getFilter()).getSqlExpression());
        assertEquals("size > 5", ((SqlRuleFilter) a.getRule(topic, "sub", "sql").getFilter()).getSqlExpression());
        a.deleteRule(topic, "sub", "$Default");
        rules.clear();
        a.listRules(topic, "sub").forEach(r -> rules.add(r.getName()));
        assertEquals(List.of("correlation", "sql"), rules.stream().sorted().toList());
        assertThrows(ResourceNotFoundException.class, () -> a.getRule(topic, "sub", "$Default"));

        // Runtime counts.
        try (Closer c = new Closer()) {
            var s = c.add(builder().sender().topicName(topic).buildClient());
            ServiceBusMessage m = new ServiceBusMessage("m");
            m.getApplicationProperties().put("color", "red");
            m.getApplicationProperties().put("size", 9);
            s.sendMessage(m);
        }
        TopicRuntimeProperties tr = a.getTopicRuntimeProperties(topic);
        assertEquals(2, tr.getSubscriptionCount());
        SubscriptionRuntimeProperties sr = a.getSubscriptionRuntimeProperties(topic, "sub");
        assertEquals(1, sr.getActiveMessageCount());
        assertEquals(1, a.getSubscriptionRuntimeProperties(topic, "second").getActiveMessageCount());

        a.deleteSubscription(topic, "second");
        assertFalse(a.getSubscriptionExists(topic, "second"));
        a.deleteTopic(topic);
        assertFalse(a.getTopicExists(topic));
        assertThrows(ResourceNotFoundException.class, () -> a.getSubscription(topic, "sub"));
    }

    @Test
    void forwarding() {
        ServiceBusAdministrationClient a = admin();
        String target = queue("forward-target");
        String dead = queue("forward-dead");
        String source = queue("forward-source", o -> o.setForwardTo(target).setForwardDeadLetteredMessagesTo(dead));
        QueueProperties p = a.getQueue(source);
        assertTrue(p.getForwardTo().endsWith("/" + target), "ForwardTo " + p.getForwardTo());
        assertTrue(p.getForwardDeadLetteredMessagesTo().endsWith("/" + dead), "ForwardDeadLetteredMessagesTo " + p.getForwardDeadLetteredMessagesTo());
        try (Closer c = new Closer()) {
            send(sender(c, source), "forwarded");
            ServiceBusReceiverClient r = receiver(c, target);
            ServiceBusReceivedMessage m = receiveN(r, 1).get(0);
            assertEquals("forwarded", m.getBody().toString());
            r.complete(m);
            // A dead letter of a queue forwarding its dead letters goes to the other queue.
            String src2 = queue("forward-source-dl", o -> o.setForwardDeadLetteredMessagesTo(dead));
            send(sender(c, src2), "dead");
            ServiceBusReceiverClient r2 = receiver(c, src2);
            r2.deadLetter(receiveN(r2, 1).get(0));
            assertEquals(List.of("dead"), bodies(receiveN(receiver(c, dead), 1)));
        }
    }

    @Test
    void entityAuthorizationRule() {
        String key = Base64.getEncoder().encodeToString("a key of the queue's own, 32 b!!".getBytes(StandardCharsets.UTF_8));
        String q = queue("auth-rule", o -> o.getAuthorizationRules().add(
            new SharedAccessAuthorizationRule("sender", key, key, List.of(AccessRights.SEND))));
        List<AuthorizationRule> rules = admin().getQueue(q).getAuthorizationRules();
        assertEquals(1, rules.size());
        assertEquals("sender", rules.get(0).getKeyName());
        assertEquals(key, rules.get(0).getPrimaryKey());
        assertEquals(List.of(AccessRights.SEND), rules.get(0).getAccessRights());
        String cs = withKey("sender", key);
        try (Closer c = new Closer()) {
            c.add(new ServiceBusClientBuilder().connectionString(cs).sender().queueName(q).buildClient())
                .sendMessage(new ServiceBusMessage("with the queue's key"));
            assertEquals(List.of("with the queue's key"), bodies(receiveN(receiver(c, q), 1)));
        }
    }

    @Test
    void namespaceProperties() {
        var ns = admin().getNamespaceProperties();
        assertNotNull(ns.getName());
        assertNotNull(ns.getMessagingSku());
    }
}
