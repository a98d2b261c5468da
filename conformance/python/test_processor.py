"""The Python SDK's processing helpers: AutoLockRenewer, the iterating
receiver, and session receivers kept alive past their lock."""

import datetime
import time

from azure.servicebus import AutoLockRenewer, ServiceBusMessage

from helpers import body

LOCK = datetime.timedelta(seconds=5)


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc)


def test_auto_lock_renewer_message(client, make_queue):
    q = make_queue(lock_duration=LOCK)
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage("long work"))
    failures = []
    renewer = AutoLockRenewer(max_lock_renewal_duration=30, on_lock_renew_failure=lambda m, e: failures.append(e))
    try:
        with client.get_queue_receiver(q, auto_lock_renewer=renewer) as receiver:
            (m,) = receiver.receive_messages(max_message_count=1, max_wait_time=10)
            first = m.locked_until_utc
            time.sleep(LOCK.total_seconds() + 2)  # longer than the lock
            assert m.locked_until_utc > first
            assert not m._lock_expired  # pylint: disable=protected-access
            receiver.complete_message(m)
            # Nothing was redelivered meanwhile.
            assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []
    finally:
        renewer.close()
    assert failures == []


def test_auto_lock_renewer_session(client, make_queue):
    q = make_queue("sq", requires_session=True, lock_duration=LOCK)
    with client.get_queue_sender(q) as sender:
        sender.send_messages([ServiceBusMessage("s1", session_id="long"), ServiceBusMessage("s2", session_id="long")])
    failures = []
    renewer = AutoLockRenewer(max_lock_renewal_duration=30, on_lock_renew_failure=lambda s, e: failures.append(e))
    try:
        with client.get_queue_receiver(q, session_id="long", auto_lock_renewer=renewer) as receiver:
            first = receiver.session.locked_until_utc
            (m,) = receiver.receive_messages(max_message_count=1, max_wait_time=10)
            time.sleep(LOCK.total_seconds() + 2)
            assert receiver.session.locked_until_utc > first
            assert receiver.session.locked_until_utc > utcnow()
            receiver.complete_message(m)
            (n,) = receiver.receive_messages(max_message_count=1, max_wait_time=10)
            assert body(n) == b"s2"
            receiver.complete_message(n)
    finally:
        renewer.close()
    assert failures == []


def test_iterating_receiver(client, make_queue):
    q = make_queue()
    with client.get_queue_sender(q) as sender:
        sender.send_messages([ServiceBusMessage(f"before-{i}") for i in range(3)])
    got = []
    with client.get_queue_receiver(q, max_wait_time=3) as receiver:
        for m in receiver:  # ends after max_wait_time without a message
            got.append(body(m).decode())
            receiver.complete_message(m)
            if len(got) == 3:
                with client.get_queue_sender(q) as sender:
                    sender.send_messages([ServiceBusMessage(f"after-{i}") for i in range(2)])
    assert got == ["before-0", "before-1", "before-2", "after-0", "after-1"]
