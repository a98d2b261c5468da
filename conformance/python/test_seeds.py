"""The seed scenarios with azure-servicebus directly (no toolkit): seed 000,
the order saga on a session-enabled subscription with session state and a
scheduled timeout; seed 003, the job pipeline with one session per job and
a failed job's remaining tasks dead-lettered. The Go versions are
conformance/seed_saga_test.go and conformance/seed_pipeline_test.go."""

import datetime
import json
import threading
import time
from collections import defaultdict

from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import OperationTimeoutError, SessionCannotBeLockedError
from azure.servicebus.management import CorrelationRuleFilter, SqlRuleFilter

from helpers import body, prop, receive_n, unique


def later(seconds):
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)


def run_session_processors(conn_str, open_receiver, handle, done, concurrency=2, idle=1, limit=45):
    """Runs `concurrency` session processors: accept the next session, handle
    its messages one by one until it is idle for `idle` seconds, release it,
    repeat; until done() or `limit` seconds."""
    deadline = time.monotonic() + limit
    failures = []

    def worker():
        with ServiceBusClient.from_connection_string(conn_str, retry_total=0) as c:
            while not failures and not done() and time.monotonic() < deadline:
                try:
                    receiver = open_receiver(c)
                    receiver.__enter__()
                except (OperationTimeoutError, SessionCannotBeLockedError):
                    continue  # no session right now
                try:
                    while not failures and not done() and time.monotonic() < deadline:
                        msgs = receiver.receive_messages(max_message_count=1, max_wait_time=idle)
                        if not msgs:
                            break
                        for m in msgs:
                            handle(receiver, m)
                except Exception as err:  # pylint: disable=broad-except
                    failures.append(err)
                finally:
                    receiver.__exit__(None, None, None)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    assert done(), f"the scenario did not finish within {limit} s"


def state_of(receiver):
    raw = receiver.session.get_state()
    return None if raw is None else json.loads(raw)


def set_state(receiver, value):
    receiver.session.set_state(None if value is None else json.dumps(value))


def test_seed_saga(conn_str, client, admin, make_topic):
    topic = make_topic("orchestration", subscriptions={"orchestrator": {"requires_session": True}})
    admin.delete_rule(topic, "orchestrator", "$Default")
    admin.create_rule(topic, "orchestrator", "PaymentAccepted", filter=CorrelationRuleFilter(properties={"MessageType": "PaymentAccepted"}))
    admin.create_rule(topic, "orchestrator", "ItemShipped", filter=SqlRuleFilter("MessageType = 'ItemShipped'"))
    admin.create_rule(topic, "orchestrator", "Timeout", filter=CorrelationRuleFilter(properties={"MessageType": "Timeout"}))

    happy, unhappy = unique("order-happy"), unique("order-unhappy")
    log = defaultdict(list)
    lock = threading.Lock()

    def order_message(order, kind, text):
        return ServiceBusMessage(text, session_id=order, correlation_id=order, application_properties={"MessageType": kind})

    publisher = client.get_topic_sender(topic)
    publisher.__enter__()
    try:
        def handle(receiver, m):
            order = receiver.session.session_id
            kind = prop(m, "MessageType")
            saved = state_of(receiver)
            started = saved is not None
            st = saved if started else {"paymentAccepted": False, "itemShipped": False}
            with lock:
                if kind in ("PaymentAccepted", "ItemShipped"):
                    if not started:
                        publisher.schedule_messages(order_message(order, "Timeout", f"check {order}"), later(2))
                    st["paymentAccepted" if kind == "PaymentAccepted" else "itemShipped"] = True
                    log[order].append(kind)
                    if st["paymentAccepted"] and st["itemShipped"]:
                        log[order].append("completed")
                        set_state(receiver, None)
                    else:
                        set_state(receiver, st)
                elif kind == "Timeout":
                    if not started:
                        log[order].append("timeout discarded")
                    else:
                        log[order].append(f"compensated (payment {st['paymentAccepted']}, shipment {st['itemShipped']})")
                        set_state(receiver, None)
                else:
                    log[order].append(f"unexpected {kind}")
            receiver.complete_message(m)

        publisher.send_messages([order_message(happy, "PaymentAccepted", "Payment OK"), order_message(happy, "Audit", "not for the saga")])
        publisher.schedule_messages(order_message(happy, "ItemShipped", "Shipping OK"), later(1))
        publisher.send_messages(order_message(unhappy, "PaymentAccepted", "Payment OK"))

        def finished(order):
            last = log[order][-1] if log[order] else ""
            return last == "timeout discarded" or last.startswith("compensated")

        run_session_processors(
            conn_str,
            lambda c: c.get_subscription_receiver(topic, "orchestrator", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=2),
            handle,
            lambda: finished(happy) and finished(unhappy),
        )
    finally:
        publisher.__exit__(None, None, None)

    assert log[happy] == ["PaymentAccepted", "ItemShipped", "completed", "timeout discarded"]
    assert log[unhappy] == ["PaymentAccepted", "compensated (payment True, shipment False)"]
    for order in (happy, unhappy):
        with client.get_subscription_receiver(topic, "orchestrator", session_id=order) as r:
            assert r.session.get_state() is None, f"order {order}: state cleared"
            assert r.peek_messages(max_message_count=10) == [], f"order {order}: nothing left (Audit matched no rule)"


def test_seed_pipeline(conn_str, client, make_queue):
    q = make_queue("jobs", requires_session=True)
    purchase, imports = unique("job-purchase"), unique("job-import")

    def task(job, name, last, fails):
        return ServiceBusMessage(name, session_id=job, application_properties={"IsLastMessage": last, "Fails": fails})

    with client.get_queue_sender(q) as sender:
        sender.send_messages([
            task(purchase, "generate order number", False, False),
            task(imports, "import product 1", False, False),
            task(purchase, "process payment", False, True),
            task(imports, "import product 2", False, False),
            task(purchase, "generate receipt", False, False),
            task(imports, "import product 3", True, False),
            task(purchase, "send email", True, False),
        ])

    log = defaultdict(list)
    settled = [0]
    attempts = 2

    def handle(receiver, m):
        job = receiver.session.session_id
        name = body(m).decode()
        state = state_of(receiver)
        last, fails = prop(m, "IsLastMessage"), prop(m, "Fails")
        delivery = m.delivery_count + 1
        if state and state.get("isFailedSession"):
            log[job].append(f"skipped {name}")
            receiver.dead_letter_message(m, reason="SessionFailed", error_description="an earlier task of the job failed")
        elif fails and delivery < attempts:
            log[job].append(f"failed {name} (attempt {delivery})")
            receiver.abandon_message(m)
            return
        elif fails:
            log[job].append(f"failed {name} (attempt {delivery}), job failed")
            set_state(receiver, {"isFailedSession": True})
            receiver.dead_letter_message(m, reason="TaskFailed", error_description="payment service unavailable")
        else:
            log[job].append(f"ran {name}")
            receiver.complete_message(m)
        if last:
            set_state(receiver, None)
        settled[0] += 1

    run_session_processors(
        conn_str,
        lambda c: c.get_queue_receiver(q, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=2),
        handle,
        lambda: settled[0] == 7,
    )

    assert log[purchase] == [
        "ran generate order number",
        "failed process payment (attempt 1)",
        "failed process payment (attempt 2), job failed",
        "skipped generate receipt",
        "skipped send email",
    ]
    assert log[imports] == ["ran import product 1", "ran import product 2", "ran import product 3"]
    with client.get_queue_receiver(q, sub_queue=ServiceBusSubQueue.DEAD_LETTER, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as dlq:
        dead = receive_n(dlq, 3)
    assert [(body(m).decode(), m.dead_letter_reason, m.session_id) for m in dead] == [
        ("process payment", "TaskFailed", purchase),
        ("generate receipt", "SessionFailed", purchase),
        ("send email", "SessionFailed", purchase),
    ]
    for job in (purchase, imports):
        with client.get_queue_receiver(q, session_id=job) as r:
            assert r.session.get_state() is None, f"job {job}: state cleared by its last task"
