"""Sending, receiving and settling with azure-servicebus against Busbar."""

import datetime
import time
import uuid

import pytest
from azure.servicebus import ServiceBusMessage, ServiceBusReceiveMode, ServiceBusSubQueue
from azure.servicebus.exceptions import MessageLockLostError

from helpers import body, prop, receive_n

UTC = datetime.timezone.utc


def now():
    return datetime.datetime.now(UTC)


def test_send_receive_peek_lock(client, make_queue):
    q = make_queue()
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage("hello", message_id="m1", application_properties={"k": "v"}))
    before = now()
    with client.get_queue_receiver(q) as receiver:
        (m,) = receive_n(receiver, 1)
        assert body(m) == b"hello"
        assert m.message_id == "m1"
        assert prop(m, "k") == "v"
        assert m.delivery_count == 0
        assert m.sequence_number >= 1
        assert m.lock_token is not None
        assert m.locked_until_utc > before
        assert abs((m.enqueued_time_utc - before).total_seconds()) < 60
        receiver.complete_message(m)
        assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []
        assert receiver.peek_messages(max_message_count=1) == []


def test_receive_and_delete(client, make_queue):
    q = make_queue()
    with client.get_queue_sender(q) as sender:
        sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
    with client.get_queue_receiver(q, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        got = receive_n(receiver, 3)
        assert [body(m) for m in got] == [b"m0", b"m1", b"m2"]
        assert all(m.lock_token is None for m in got)
    with client.get_queue_receiver(q) as receiver:
        assert receiver.peek_messages(max_message_count=5) == []


def test_message_batch(client, make_queue):
    q = make_queue()
    with client.get_queue_sender(q) as sender:
        batch = sender.create_message_batch()
        for i in range(10):
            batch.add_message(ServiceBusMessage(f"b{i}"))
        sender.send_messages(batch)
    with client.get_queue_receiver(q, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        got = receive_n(receiver, 10)
    assert [body(m) for m in got] == [f"b{i}".encode() for i in range(10)]
    seqs = [m.sequence_number for m in got]
    assert seqs == sorted(seqs) and len(set(seqs)) == 10


def test_schedule_and_cancel(client, make_queue):
    q = make_queue()
    at = now() + datetime.timedelta(hours=1)
    with client.get_queue_sender(q) as sender:
        seqs = sender.schedule_messages([ServiceBusMessage("s1"), ServiceBusMessage("s2")], at)
        assert len(seqs) == 2 and seqs[0] != seqs[1]
        with client.get_queue_receiver(q) as receiver:
            peeked = receiver.peek_messages(max_message_count=10)
            assert sorted(m.sequence_number for m in peeked) == sorted(seqs)
            for m in peeked:
                assert m.state.name == "SCHEDULED"
                assert abs((m.scheduled_enqueue_time_utc - at).total_seconds()) < 1
            sender.cancel_scheduled_messages(seqs[0])
            peeked = receiver.peek_messages(max_message_count=10, sequence_number=1)
            assert [m.sequence_number for m in peeked] == [seqs[1]]


def test_scheduled_delivery(client, make_queue):
    q = make_queue()
    at = now() + datetime.timedelta(seconds=2)
    with client.get_queue_sender(q) as sender:
        sender.schedule_messages(ServiceBusMessage("by-call"), at)
        sender.send_messages(ServiceBusMessage("by-property", scheduled_enqueue_time_utc=at))
    with client.get_queue_receiver(q, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        got = receive_n(receiver, 2, max_wait_time=15)
        arrived = now()
    assert sorted(body(m) for m in got) == [b"by-call", b"by-property"]
    assert arrived >= at
    for m in got:
        assert m.enqueued_time_utc >= at - datetime.timedelta(milliseconds=5)


def test_service_assigned_message_id(client, make_queue):
    q = make_queue()
    with client.get_queue_sender(q) as sender:
        # The SDK assigns a message id itself when none is given.
        sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b"), ServiceBusMessage("c", message_id="mine")])
    with client.get_queue_receiver(q, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        got = receive_n(receiver, 3)
    ids = [m.message_id for m in got]
    assert ids[2] == "mine"
    assert ids[0] and ids[1] and ids[0] != ids[1]


def test_large_message(client, make_queue):
    q = make_queue()
    payload = bytes(i % 251 for i in range(1_000_000))
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage(payload))
    with client.get_queue_receiver(q, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        (m,) = receive_n(receiver, 1)
    assert body(m) == payload


def test_message_properties_round_trip(client, make_queue):
    q = make_queue()
    when = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    msg = ServiceBusMessage(
        "props",
        message_id="id-1",
        content_type="application/json",
        correlation_id="corr",
        partition_key="pk",
        reply_to="replies",
        reply_to_session_id="rs",
        subject="subj",
        to="somewhere",
        time_to_live=datetime.timedelta(minutes=5),
        application_properties={"s": "text", "i": 42, "f": 1.5, "b": True, "t": when, "bin": b"\x00\x01"},
    )
    with client.get_queue_sender(q) as sender:
        sender.send_messages(msg)
    with client.get_queue_receiver(q, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        (m,) = receive_n(receiver, 1)
    assert (m.message_id, m.content_type, m.correlation_id, m.partition_key) == ("id-1", "application/json", "corr", "pk")
    assert (m.reply_to, m.reply_to_session_id, m.subject, m.to) == ("replies", "rs", "subj", "somewhere")
    assert m.time_to_live == datetime.timedelta(minutes=5)
    assert abs((m.expires_at_utc - m.enqueued_time_utc) - datetime.timedelta(minutes=5)) < datetime.timedelta(seconds=1)
    assert prop(m, "s") == "text"
    assert prop(m, "i") == 42
    assert prop(m, "f") == 1.5
    assert prop(m, "b") is True
    got_time = prop(m, "t")
    # pyamqp decodes an AMQP timestamp as milliseconds since the epoch.
    assert got_time == int(when.timestamp() * 1000)
    assert m.application_properties[b"bin"] == b"\x00\x01"


def test_abandon_redelivers(client, make_queue):
    q = make_queue()
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage("again"))
    with client.get_queue_receiver(q) as receiver:
        (m,) = receive_n(receiver, 1)
        receiver.abandon_message(m)
        (m2,) = receive_n(receiver, 1)
        assert body(m2) == b"again"
        assert m2.delivery_count == 1
        assert m2.sequence_number == m.sequence_number
        receiver.complete_message(m2)


def test_defer_and_receive_deferred(client, make_queue):
    q = make_queue()
    with client.get_queue_sender(q) as sender:
        sender.send_messages([ServiceBusMessage("deferred"), ServiceBusMessage("next")])
    with client.get_queue_receiver(q) as receiver:
        (m,) = receive_n(receiver, 1)
        assert body(m) == b"deferred"
        receiver.defer_message(m)
        (n,) = receive_n(receiver, 1)
        assert body(n) == b"next"
        receiver.complete_message(n)
        (p,) = receiver.peek_messages(max_message_count=5, sequence_number=1)
        assert p.sequence_number == m.sequence_number and p.state.name == "DEFERRED"
        (d,) = receiver.receive_deferred_messages([m.sequence_number])
        assert body(d) == b"deferred"
        assert d.state.name == "DEFERRED"
        assert d.lock_token is not None and d.locked_until_utc > now()
        # Receiving a deferred message is a delivery (see docs/conformance.md).
        assert d.delivery_count == 1
        receiver.complete_message(d)
        assert receiver.peek_messages(max_message_count=5, sequence_number=1) == []


def test_dead_letter_with_reason(client, make_queue):
    q = make_queue()
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage("poison", application_properties={"keep": "me"}))
    with client.get_queue_receiver(q) as receiver:
        (m,) = receive_n(receiver, 1)
        receiver.dead_letter_message(m, reason="BadInput", error_description="cannot parse")
    with client.get_queue_receiver(q, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (d,) = receive_n(dlq, 1)
        assert body(d) == b"poison"
        assert d.dead_letter_reason == "BadInput"
        assert d.dead_letter_error_description == "cannot parse"
        assert prop(d, "keep") == "me"
        dlq.complete_message(d)
        assert dlq.peek_messages(max_message_count=1) == []


def test_peek(client, make_queue):
    q = make_queue()
    with client.get_queue_sender(q) as sender:
        sender.send_messages([ServiceBusMessage(f"p{i}") for i in range(5)])
    with client.get_queue_receiver(q) as receiver:
        first = receiver.peek_messages(max_message_count=3)
        assert [body(m) for m in first] == [b"p0", b"p1", b"p2"]
        rest = receiver.peek_messages(max_message_count=10)
        assert [body(m) for m in rest] == [b"p3", b"p4"]
        from_seq = receiver.peek_messages(max_message_count=10, sequence_number=first[1].sequence_number)
        assert [body(m) for m in from_seq] == [b"p1", b"p2", b"p3", b"p4"]
        assert all(m.lock_token is None for m in first)
        # Peeking is not a delivery.
        got = receive_n(receiver, 5)
        assert [m.delivery_count for m in got] == [0] * 5


def test_renew_message_lock(client, make_queue):
    q = make_queue(lock_duration=datetime.timedelta(seconds=5))
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage("renew"))
    with client.get_queue_receiver(q) as receiver:
        (m,) = receive_n(receiver, 1)
        first = m.locked_until_utc
        time.sleep(3)
        renewed = receiver.renew_message_lock(m)
        assert renewed >= first + datetime.timedelta(seconds=2.5)
        assert m.locked_until_utc == renewed
        time.sleep(max(0.0, (first - now()).total_seconds()) + 1)
        receiver.complete_message(m)  # past the first lock, within the renewed one


def test_lock_expiry(client, make_queue):
    q = make_queue(lock_duration=datetime.timedelta(seconds=5))
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage("expire"))
    with client.get_queue_receiver(q) as receiver:
        (m,) = receive_n(receiver, 1)
        (again,) = receive_n(receiver, 1, max_wait_time=15)
        assert again.sequence_number == m.sequence_number
        assert again.delivery_count == 1
        with pytest.raises(MessageLockLostError):
            receiver.complete_message(m)
        receiver.complete_message(again)


def test_max_delivery_count(client, make_queue):
    q = make_queue(max_delivery_count=2)
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage("bounce"))
    with client.get_queue_receiver(q) as receiver:
        for _ in range(2):
            (m,) = receive_n(receiver, 1)
            receiver.abandon_message(m)
        assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []
    with client.get_queue_receiver(q, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (d,) = receive_n(dlq, 1)
        assert body(d) == b"bounce"
        assert d.dead_letter_reason == "MaxDeliveryCountExceeded"


def test_duplicate_detection(client, make_queue):
    q = make_queue(requires_duplicate_detection=True, duplicate_detection_history_time_window=datetime.timedelta(minutes=1))
    mid = str(uuid.uuid4())
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage("first", message_id=mid))
        sender.send_messages(ServiceBusMessage("second", message_id=mid))
        sender.send_messages(ServiceBusMessage("other"))
    with client.get_queue_receiver(q, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        got = receive_n(receiver, 2)
        assert [body(m) for m in got] == [b"first", b"other"]
        assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []


def test_ttl_dead_lettering(client, make_queue):
    q = make_queue(dead_lettering_on_message_expiration=True)
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage("short", time_to_live=datetime.timedelta(seconds=1)))
        sender.send_messages(ServiceBusMessage("long", time_to_live=datetime.timedelta(hours=1)))
    with client.get_queue_receiver(q, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (d,) = receive_n(dlq, 1, max_wait_time=15)
        assert body(d) == b"short"
        assert d.dead_letter_reason == "TTLExpiredException"
        dlq.complete_message(d)
    with client.get_queue_receiver(q) as receiver:
        (m,) = receive_n(receiver, 1)
        assert body(m) == b"long"
        receiver.complete_message(m)
