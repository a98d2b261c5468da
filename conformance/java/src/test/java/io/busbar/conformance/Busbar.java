package io.busbar.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.fail;

import com.azure.core.amqp.AmqpRetryOptions;
import com.azure.core.amqp.exception.AmqpErrorCondition;
import com.azure.core.amqp.exception.AmqpException;
import com.azure.core.http.policy.HttpPipelinePolicy;
import com.azure.core.http.policy.RetryOptions;
import com.azure.core.http.policy.FixedDelayOptions;
import com.azure.core.util.UrlBuilder;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusException;
import com.azure.messaging.servicebus.ServiceBusFailureReason;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClient;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClientBuilder;
import com.azure.messaging.servicebus.administration.models.CreateQueueOptions;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import org.junit.jupiter.api.function.Executable;

/**
 * What every test of the suite shares: the broker under test (from the
 * environment TestJavaConformance sets), entity names unique to the run,
 * clients, and receive and wait helpers. Every test creates its own
 * entities through the management API, so tests run in parallel.
 */
final class Busbar {
    private Busbar() {}

    /** The data-plane connection string (an emulator one: UseDevelopmentEmulator=true). */
    static final String CONNECTION_STRING = env("BUSBAR_CONNECTION_STRING");
    /** The management API's base URL, e.g. http://127.0.0.1:5300. */
    static final String ADMIN_ENDPOINT = env("BUSBAR_ADMIN_ENDPOINT");
    /** Makes entity names unique to the run. */
    static final String RUN_ID = System.getenv().getOrDefault("BUSBAR_CONFORMANCE_RUN_ID", Long.toHexString(System.nanoTime()));

    /** How long a receive waits for messages that are already there. */
    static final Duration RECEIVE_WAIT = Duration.ofSeconds(10);

    private static final AtomicInteger counter = new AtomicInteger();

    private static String env(String name) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalStateException(name + " is not set: run this suite through TestJavaConformance (go test ./conformance/ -run TestJava)");
        }
        return v;
    }

    /** A name unique to this run, starting with base. */
    static String unique(String base) {
        return "java-" + base + "-" + RUN_ID + "-" + counter.incrementAndGet();
    }

    private static ServiceBusAdministrationClient admin;

    /**
     * The management client. The emulator kind of connection string gives
     * it the SAS key; the policy sends its requests to the broker's HTTP
     * listener in plain HTTP (the SDK builds https URLs without a port).
     */
    static synchronized ServiceBusAdministrationClient admin() {
        if (admin == null) {
            URI target = URI.create(ADMIN_ENDPOINT);
            HttpPipelinePolicy plainHttp = (ctx, next) -> {
                UrlBuilder url = UrlBuilder.parse(ctx.getHttpRequest().getUrl());
                url.setScheme(target.getScheme()).setHost(target.getHost()).setPort(target.getPort());
                ctx.getHttpRequest().setUrl(url.toString());
                return next.process();
            };
            admin = new ServiceBusAdministrationClientBuilder()
                .connectionString(CONNECTION_STRING)
                .addPolicy(plainHttp)
                .retryOptions(new RetryOptions(new FixedDelayOptions(2, Duration.ofMillis(200))))
                .buildClient();
        }
        return admin;
    }

    /** Creates a queue with the given options and returns its name. */
    static String queue(String base, Consumer<CreateQueueOptions> options) {
        String name = unique(base);
        CreateQueueOptions o = new CreateQueueOptions();
        options.accept(o);
        admin().createQueue(name, o);
        return name;
    }

    static String queue(String base) {
        return queue(base, o -> {});
    }

    static String sessionQueue(String base) {
        return queue(base, o -> o.setSessionRequired(true));
    }

    /** CONNECTION_STRING with another key name and key. */
    static String withKey(String keyName, String key) {
        return CONNECTION_STRING
            .replaceAll("SharedAccessKeyName=[^;]*", Matcher.quoteReplacement("SharedAccessKeyName=" + keyName))
            .replaceAll("SharedAccessKey=[^;]*", Matcher.quoteReplacement("SharedAccessKey=" + key));
    }

    /** A client builder: every builder is a connection of its own. */
    static ServiceBusClientBuilder builder() {
        return builder(CONNECTION_STRING, Duration.ofSeconds(20), 2);
    }

    /**
     * A builder with this try timeout and retry count: short ones for
     * operations expected to fail or to time out.
     */
    static ServiceBusClientBuilder builder(String connectionString, Duration tryTimeout, int retries) {
        return new ServiceBusClientBuilder().connectionString(connectionString)
            .retryOptions(new AmqpRetryOptions().setTryTimeout(tryTimeout).setMaxRetries(retries));
    }

    /** Closes what a test opened, in reverse order, at its end. */
    static final class Closer implements AutoCloseable {
        private final List<AutoCloseable> items = new ArrayList<>();

        <T extends AutoCloseable> T add(T c) {
            items.add(c);
            return c;
        }

        @Override
        public void close() {
            for (int i = items.size() - 1; i >= 0; i--) {
                try {
                    items.get(i).close();
                } catch (Exception e) {
                    // closing is best effort; the test's assertions decided
                }
            }
        }
    }

    static ServiceBusSenderClient sender(Closer c, String queue) {
        return c.add(builder().sender().queueName(queue).buildClient());
    }

    static ServiceBusReceiverClient receiver(Closer c, String queue) {
        return c.add(builder().receiver().queueName(queue).disableAutoComplete().buildClient());
    }

    /** Sends messages with these bodies, one send each. */
    static void send(ServiceBusSenderClient s, String... bodies) {
        for (String b : bodies) {
            s.sendMessage(new ServiceBusMessage(b));
        }
    }

    /** Receives exactly n messages within RECEIVE_WAIT each, failing otherwise. */
    static List<ServiceBusReceivedMessage> receiveN(ServiceBusReceiverClient r, int n) {
        List<ServiceBusReceivedMessage> got = new ArrayList<>();
        long deadline = System.nanoTime() + RECEIVE_WAIT.toNanos();
        while (got.size() < n && System.nanoTime() < deadline) {
            for (ServiceBusReceivedMessage m : r.receiveMessages(n - got.size(), Duration.ofSeconds(2))) {
                got.add(m);
            }
        }
        if (got.size() != n) {
            fail("received " + got.size() + " messages " + bodies(got) + ", want " + n);
        }
        return got;
    }

    /** Receives what arrives within wait (at most max messages). */
    static List<ServiceBusReceivedMessage> receiveUpTo(ServiceBusReceiverClient r, int max, Duration wait) {
        List<ServiceBusReceivedMessage> got = new ArrayList<>();
        r.receiveMessages(max, wait).forEach(got::add);
        return got;
    }

    static List<String> bodies(List<ServiceBusReceivedMessage> ms) {
        List<String> out = new ArrayList<>();
        for (ServiceBusReceivedMessage m : ms) {
            out.add(m.getBody().toString());
        }
        return out;
    }

    /** Peeks every message (up to 100) from the start. */
    static List<ServiceBusReceivedMessage> peekAll(ServiceBusReceiverClient r) {
        List<ServiceBusReceivedMessage> out = new ArrayList<>();
        r.peekMessages(100, 1).forEach(out::add);
        return out;
    }

    /** Polls cond every 50 ms until it holds or limit passes, then fails with what. */
    static void await(Duration limit, String what, BooleanSupplier cond) {
        long deadline = System.nanoTime() + limit.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("after " + limit + ": " + what);
            }
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                fail("interrupted waiting for " + what);
            }
        }
    }

    /** Asserts that op fails with a ServiceBusException of this reason. */
    static ServiceBusException assertFailsWith(ServiceBusFailureReason reason, Executable op) {
        try {
            op.execute();
        } catch (ServiceBusException e) {
            if (reason.equals(e.getReason())) {
                return e;
            }
            fail("failed with reason " + e.getReason() + ", want " + reason + ": " + chain(e));
        } catch (Throwable t) {
            fail("failed with " + chain(t) + ", want a ServiceBusException with reason " + reason);
        }
        return fail("succeeded, want a ServiceBusException with reason " + reason);
    }

    /**
     * Asserts that op fails with an exception whose chain holds an
     * AmqpException with this condition: how the Java SDK reports some
     * broker errors (a refused token on receive, a session locked
     * elsewhere) without a ServiceBusException around them.
     */
    static AmqpException assertFailsWithCondition(AmqpErrorCondition condition, Executable op) {
        try {
            op.execute();
        } catch (Throwable t) {
            for (Throwable c = t; c != null; c = c.getCause()) {
                if (c instanceof AmqpException a && condition.equals(a.getErrorCondition())) {
                    assertFalse(a.isTransient(), () -> "the SDK takes " + a + " as transient");
                    return a;
                }
            }
            fail("failed with " + chain(t) + ", want an AmqpException with condition " + condition);
        }
        return fail("succeeded, want an AmqpException with condition " + condition);
    }

    /** The exception with its causes, one a line. */
    static String chain(Throwable t) {
        StringBuilder b = new StringBuilder();
        for (; t != null; t = t.getCause()) {
            b.append("\n  ").append(t);
        }
        return b.toString();
    }
}
