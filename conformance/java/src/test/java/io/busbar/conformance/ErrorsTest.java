package io.busbar.conformance;

import static io.busbar.conformance.Busbar.*;
import static org.junit.jupiter.api.Assertions.*;

import com.azure.core.amqp.exception.AmqpErrorCondition;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusFailureReason;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.ServiceBusSessionReceiverClient;
import java.time.Duration;
import java.util.Base64;
import org.junit.jupiter.api.Test;

/**
 * A wrong key and an entity that does not exist fail with the service's
 * errors. The SDK wraps them in a ServiceBusException on send only;
 * elsewhere the AmqpException from the token exchange comes out as it is, or
 * as the cause of the receiver's termination.
 */
class ErrorsTest {

    static ServiceBusClientBuilder quick(String connectionString) {
        return builder(connectionString, Duration.ofSeconds(10), 0);
    }

    @Test
    void wrongKey() {
        String q = queue("wrong-key");
        String bad = withKey("RootManageSharedAccessKey", Base64.getEncoder().encodeToString(new byte[32]));
        try (Closer c = new Closer()) {
            ServiceBusSenderClient s = c.add(quick(bad).sender().queueName(q).buildClient());
            assertFailsWith(ServiceBusFailureReason.UNAUTHORIZED, () -> s.sendMessage(new ServiceBusMessage("no")));
            ServiceBusReceiverClient r = c.add(quick(bad).receiver().queueName(q).buildClient());
            // The receiver reports the refused token as the cause of its termination.
            assertFailsWithCondition(AmqpErrorCondition.UNAUTHORIZED_ACCESS, () -> r.receiveMessages(1, Duration.ofSeconds(2)).forEach(m -> {}));
            assertEquals(0, admin().getQueueRuntimeProperties(q).getTotalMessageCount(), "nothing was sent");
        }
    }

    @Test
    void unknownEntity() {
        String missing = unique("missing");
        try (Closer c = new Closer()) {
            ServiceBusSenderClient s = c.add(quick(CONNECTION_STRING).sender().queueName(missing).buildClient());
            assertFailsWith(ServiceBusFailureReason.MESSAGING_ENTITY_NOT_FOUND, () -> s.sendMessage(new ServiceBusMessage("no")));
            ServiceBusReceiverClient r = c.add(quick(CONNECTION_STRING).receiver().queueName(missing).buildClient());
            assertFailsWithCondition(AmqpErrorCondition.NOT_FOUND, () -> r.receiveMessages(1, Duration.ofSeconds(2)).forEach(m -> {}));
            ServiceBusReceiverClient p = c.add(quick(CONNECTION_STRING).receiver().queueName(missing).buildClient());
            assertFailsWithCondition(AmqpErrorCondition.NOT_FOUND, p::peekMessage);
            ServiceBusSessionReceiverClient sr = c.add(quick(CONNECTION_STRING).sessionReceiver().queueName(missing).buildClient());
            assertFailsWithCondition(AmqpErrorCondition.NOT_FOUND, () -> sr.acceptSession("s"));
            ServiceBusSessionReceiverClient sn = c.add(quick(CONNECTION_STRING).sessionReceiver().queueName(missing).buildClient());
            assertFailsWithCondition(AmqpErrorCondition.NOT_FOUND, sn::acceptNextSession);
        }
    }
}
