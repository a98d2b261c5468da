package io.busbar.conformance;

import static io.busbar.conformance.Busbar.*;
import static org.junit.jupiter.api.Assertions.*;

import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.models.ServiceBusReceiveMode;
import com.azure.messaging.servicebus.models.SubQueue;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Entity features: duplicate detection and dead-lettering on expiry. */
class FeaturesTest {

    @Test
    void duplicateDetection() {
        String q = queue("duplicates", o -> o.setDuplicateDetectionRequired(true)
            .setDuplicateDetectionHistoryTimeWindow(Duration.ofMinutes(1)));
        try (Closer c = new Closer()) {
            ServiceBusSenderClient s = sender(c, q);
            s.sendMessage(new ServiceBusMessage("first").setMessageId("same"));
            s.sendMessage(new ServiceBusMessage("second").setMessageId("same"));
            s.sendMessage(new ServiceBusMessage("other").setMessageId("different"));
            ServiceBusReceiverClient r = receiver(c, q);
            List<ServiceBusReceivedMessage> got = receiveN(r, 2);
            assertEquals(List.of("first", "other"), bodies(got));
            assertTrue(receiveUpTo(r, 1, Duration.ofMillis(500)).isEmpty(), "the duplicate is dropped");
        }
    }

    @Test
    void ttlDeadLettering() {
        String q = queue("ttl", o -> o.setDeadLetteringOnMessageExpiration(true));
        try (Closer c = new Closer()) {
            ServiceBusSenderClient s = sender(c, q);
            s.sendMessage(new ServiceBusMessage("short").setTimeToLive(Duration.ofSeconds(1)));
            s.sendMessage(new ServiceBusMessage("long").setTimeToLive(Duration.ofHours(1)));
            ServiceBusReceiverClient dlq = c.add(builder().receiver().queueName(q).subQueue(SubQueue.DEAD_LETTER_QUEUE)
                .receiveMode(ServiceBusReceiveMode.RECEIVE_AND_DELETE).buildClient());
            ServiceBusReceivedMessage d = receiveN(dlq, 1).get(0);
            assertEquals("short", d.getBody().toString());
            assertEquals("TTLExpiredException", d.getDeadLetterReason());
            List<ServiceBusReceivedMessage> left = peekAll(receiver(c, q));
            assertEquals(List.of("long"), bodies(left));
        }
    }
}
