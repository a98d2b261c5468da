package io.busbar.conformance;

import static org.junit.jupiter.api.Assertions.fail;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSessionReceiverClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.function.Function;

/**
 * A small session processor written with the SDK's public API only, as an
 * application without a framework would: accept the next session, handle
 * its messages one at a time until it is idle, close it, repeat. The seed
 * scenarios run on it (as they do in the Go and Node suites), since they
 * need the session state, which ServiceBusProcessorClient does not offer.
 */
final class SessionWorkers {
    private SessionWorkers() {}

    /** Handles and settles one message of an accepted session. */
    interface Handler {
        void handle(ServiceBusReceiverClient session, ServiceBusReceivedMessage m) throws Exception;
    }

    /** What the handlers did, by session id, in order. */
    static final class Log {
        private final Map<String, List<String>> steps = new ConcurrentHashMap<>();

        void add(String session, String step) {
            steps.computeIfAbsent(session, k -> new ArrayList<>());
            synchronized (this) {
                steps.get(session).add(step);
            }
        }

        synchronized List<String> get(String session) {
            return List.copyOf(steps.getOrDefault(session, List.of()));
        }

        synchronized String last(String session) {
            List<String> s = steps.getOrDefault(session, List.of());
            return s.isEmpty() ? "" : s.get(s.size() - 1);
        }

        @Override
        public synchronized String toString() {
            return steps.toString();
        }
    }

    /**
     * Runs concurrency workers, each on a connection of its own, until done
     * holds, and fails if that takes longer than limit or a handler fails.
     * receivers picks the queue or subscription on a builder.
     */
    static void run(Function<ServiceBusClientBuilder, ServiceBusSessionReceiverClient> receivers, Handler handler,
                    int concurrency, Duration idle, BooleanSupplier done, Duration limit, Log log) throws InterruptedException {
        long deadline = System.nanoTime() + limit.toNanos();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> workers = new ArrayList<>();
        for (int i = 0; i < concurrency; i++) {
            // A short try timeout: AcceptNextSession gives up after about 3 s
            // when no session is available, and the worker asks again.
            ServiceBusSessionReceiverClient client = receivers.apply(Busbar.builder(Busbar.CONNECTION_STRING, Duration.ofSeconds(3), 1));
            Thread t = new Thread(() -> {
                try (client) {
                    while (failure.get() == null && !done.getAsBoolean() && System.nanoTime() < deadline) {
                        processNextSession(client, handler, idle, done);
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            });
            t.start();
            workers.add(t);
        }
        for (Thread t : workers) {
            t.join();
        }
        if (failure.get() != null) {
            fail("session worker failed; the handlers did " + log, failure.get());
        }
        if (!done.getAsBoolean()) {
            fail("not done after " + limit + "; the handlers did " + log);
        }
    }

    private static void processNextSession(ServiceBusSessionReceiverClient client, Handler handler, Duration idle,
                                           BooleanSupplier done) throws Exception {
        ServiceBusReceiverClient session;
        try {
            session = client.acceptNextSession();
        } catch (IllegalStateException e) {
            if (e.getCause() instanceof TimeoutException) {
                return; // none available now
            }
            throw e;
        }
        try (session) {
            while (!done.getAsBoolean()) {
                List<ServiceBusReceivedMessage> got = new ArrayList<>();
                session.receiveMessages(1, idle).forEach(got::add);
                if (got.isEmpty()) {
                    return;
                }
                for (ServiceBusReceivedMessage m : got) {
                    handler.handle(session, m);
                }
            }
        }
    }
}
