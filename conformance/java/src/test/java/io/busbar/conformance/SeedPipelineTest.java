package io.busbar.conformance;

import static io.busbar.conformance.Busbar.*;
import static org.junit.jupiter.api.Assertions.*;

import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.models.DeadLetterOptions;
import com.azure.messaging.servicebus.models.ServiceBusReceiveMode;
import com.azure.messaging.servicebus.models.SubQueue;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Seed 003, "Pipeline Execution using Azure Service Bus": one session per
 * job, its tasks in order. A task that keeps failing marks the session
 * state failed and is dead-lettered; the job's remaining tasks are
 * dead-lettered without running; the last task clears the state. Another
 * job's session carries on.
 */
class SeedPipelineTest {

    /** Deliveries a task gets before its job is declared failed. */
    static final int ATTEMPTS = 2;
    static final byte[] FAILED = "failed".getBytes(StandardCharsets.UTF_8);

    static ServiceBusMessage task(String job, String name, boolean last, boolean fails) {
        ServiceBusMessage m = new ServiceBusMessage(name).setSessionId(job);
        m.getApplicationProperties().put("IsLastMessage", last);
        m.getApplicationProperties().put("Fails", fails);
        return m;
    }

    @Test
    void pipeline() throws Exception {
        String q = sessionQueue("jobs");
        String purchase = unique("job-purchase");
        String imports = unique("job-import");
        SessionWorkers.Log log = new SessionWorkers.Log();
        AtomicInteger settled = new AtomicInteger();
        try (Closer c = new Closer()) {
            ServiceBusSenderClient s = sender(c, q);
            // The jobs' tasks, interleaved on the queue as two concurrent jobs are.
            for (ServiceBusMessage m : List.of(
                task(purchase, "generate order number", false, false),
                task(imports, "import product 1", false, false),
                task(purchase, "process payment", false, true),
                task(imports, "import product 2", false, false),
                task(purchase, "generate receipt", false, false),
                task(imports, "import product 3", true, false),
                task(purchase, "send email", true, false))) {
                s.sendMessage(m);
            }

            SessionWorkers.Handler handle = (session, m) -> {
                String job = session.getSessionId();
                String name = m.getBody().toString();
                boolean failedJob = session.getSessionState() != null;
                boolean last = Boolean.TRUE.equals(m.getApplicationProperties().get("IsLastMessage"));
                boolean fails = Boolean.TRUE.equals(m.getApplicationProperties().get("Fails"));
                long attempt = m.getDeliveryCount() + 1; // the SDK's count starts at 0
                if (failedJob) {
                    log.add(job, "skipped " + name);
                    session.deadLetter(m, new DeadLetterOptions().setDeadLetterReason("SessionFailed")
                        .setDeadLetterErrorDescription("an earlier task of the job failed"));
                } else if (fails && attempt < ATTEMPTS) {
                    log.add(job, "failed " + name + " (attempt " + attempt + ")");
                    session.abandon(m);
                    return; // not settled for good: it comes back first
                } else if (fails) {
                    log.add(job, "failed " + name + " (attempt " + attempt + "), job failed");
                    session.setSessionState(FAILED);
                    session.deadLetter(m, new DeadLetterOptions().setDeadLetterReason("TaskFailed")
                        .setDeadLetterErrorDescription("payment service unavailable"));
                } else {
                    log.add(job, "ran " + name);
                    session.complete(m);
                }
                if (last) {
                    session.setSessionState(null); // the seed's clean-up
                }
                settled.incrementAndGet();
            };
            SessionWorkers.run(b -> b.sessionReceiver().queueName(q).disableAutoComplete().buildClient(),
                handle, 2, Duration.ofSeconds(1), () -> settled.get() == 7, Duration.ofSeconds(45), log);

            assertEquals(List.of("ran generate order number", "failed process payment (attempt 1)",
                "failed process payment (attempt 2), job failed", "skipped generate receipt", "skipped send email"),
                log.get(purchase), "job " + purchase);
            assertEquals(List.of("ran import product 1", "ran import product 2", "ran import product 3"), log.get(imports), "job " + imports);

            // The dead-letter queue holds the failed task and the skipped
            // ones, in order, with their reasons.
            ServiceBusReceiverClient dlq = c.add(builder().receiver().queueName(q).subQueue(SubQueue.DEAD_LETTER_QUEUE)
                .receiveMode(ServiceBusReceiveMode.RECEIVE_AND_DELETE).buildClient());
            List<ServiceBusReceivedMessage> dead = receiveN(dlq, 3);
            assertEquals(List.of("process payment", "generate receipt", "send email"), bodies(dead));
            assertEquals(List.of("TaskFailed", "SessionFailed", "SessionFailed"),
                dead.stream().map(ServiceBusReceivedMessage::getDeadLetterReason).toList());
            for (ServiceBusReceivedMessage d : dead) {
                assertEquals(purchase, d.getSessionId());
            }
            // Both jobs' states were cleared by their last task.
            for (String job : List.of(purchase, imports)) {
                ServiceBusReceiverClient r = c.add(c.add(builder().sessionReceiver().queueName(q).buildClient()).acceptSession(job));
                assertNull(r.getSessionState(), "job " + job + ": state cleared by its last task");
            }
        }
    }
}
