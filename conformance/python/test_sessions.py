"""Session receivers with azure-servicebus against Busbar."""

import datetime
import time

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.exceptions import OperationTimeoutError, SessionCannotBeLockedError

from helpers import body, receive_n


@pytest.fixture
def session_queue(make_queue):
    return make_queue("sq", requires_session=True)


def send(client, q, *pairs):
    with client.get_queue_sender(q) as sender:
        sender.send_messages([ServiceBusMessage(b, session_id=s) for s, b in pairs])


def test_accept_named_session(client, session_queue):
    send(client, session_queue, ("a", "a1"), ("b", "b1"), ("a", "a2"))
    with client.get_queue_receiver(session_queue, session_id="a") as receiver:
        assert receiver.session.session_id == "a"
        got = receive_n(receiver, 2)
        assert [body(m) for m in got] == [b"a1", b"a2"]
        assert all(m.session_id == "a" for m in got)
        for m in got:
            receiver.complete_message(m)
        assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []


def test_accept_next_session(client, session_queue):
    send(client, session_queue, ("only", "x"))
    with client.get_queue_receiver(session_queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5) as receiver:
        assert receiver.session.session_id == "only"
        assert receiver.session.locked_until_utc > datetime.datetime.now(datetime.timezone.utc)
        (m,) = receive_n(receiver, 1)
        assert body(m) == b"x" and m.session_id == "only"
        receiver.complete_message(m)


def test_next_session_none_available(conn_str, session_queue):
    # The SDK retries a timeout like any other error; without retries the
    # broker's com.microsoft:timeout comes back after max_wait_time.
    with ServiceBusClient.from_connection_string(conn_str, retry_total=0) as c:
        started = time.monotonic()
        with pytest.raises(OperationTimeoutError):
            with c.get_queue_receiver(session_queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=2) as receiver:
                receiver.receive_messages(max_message_count=1, max_wait_time=2)
        assert 1.5 <= time.monotonic() - started < 8


def test_session_locked_elsewhere(client, session_queue):
    send(client, session_queue, ("held", "h"))
    with client.get_queue_receiver(session_queue, session_id="held"):
        with pytest.raises(SessionCannotBeLockedError):
            with client.get_queue_receiver(session_queue, session_id="held", max_wait_time=2) as other:
                other.receive_messages(max_message_count=1, max_wait_time=1)


def test_session_state(client, session_queue):
    send(client, session_queue, ("st", "s"))
    with client.get_queue_receiver(session_queue, session_id="st") as receiver:
        assert receiver.session.get_state() is None
        receiver.session.set_state(b"step-1")
        assert receiver.session.get_state() == b"step-1"
    with client.get_queue_receiver(session_queue, session_id="st") as receiver:
        assert receiver.session.get_state() == b"step-1"
        receiver.session.set_state("step-2")
        assert receiver.session.get_state() == b"step-2"
        receiver.session.set_state(None)
        assert receiver.session.get_state() is None


def test_renew_session_lock(client, make_queue):
    q = make_queue("sq", requires_session=True, lock_duration=datetime.timedelta(seconds=5))
    send(client, q, ("r", "r1"))
    with client.get_queue_receiver(q, session_id="r") as receiver:
        first = receiver.session.locked_until_utc
        time.sleep(1)
        renewed = receiver.session.renew_lock()
        assert renewed > first
        assert receiver.session.locked_until_utc == renewed
        (m,) = receive_n(receiver, 1)
        receiver.complete_message(m)


def test_session_fifo(client, session_queue):
    pairs = []
    for i in range(10):
        pairs += [("s1", f"one-{i}"), ("s2", f"two-{i}")]
    send(client, session_queue, *pairs)
    for sid, prefix in (("s1", "one"), ("s2", "two")):
        with client.get_queue_receiver(session_queue, session_id=sid, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
            got = receive_n(receiver, 10)
            assert [body(m) for m in got] == [f"{prefix}-{i}".encode() for i in range(10)]


def test_session_abandon_head_of_line(client, session_queue):
    send(client, session_queue, ("h", "first"), ("h", "second"))
    with client.get_queue_receiver(session_queue, session_id="h", prefetch_count=0) as receiver:
        (m,) = receive_n(receiver, 1)
        assert body(m) == b"first"
        receiver.abandon_message(m)
        (again,) = receive_n(receiver, 1)
        assert body(again) == b"first" and again.delivery_count == 1
        receiver.complete_message(again)
        (n,) = receive_n(receiver, 1)
        assert body(n) == b"second"
        receiver.complete_message(n)


def test_peek_within_session(client, session_queue):
    send(client, session_queue, ("p", "p1"), ("other", "o1"), ("p", "p2"))
    with client.get_queue_receiver(session_queue, session_id="p") as receiver:
        peeked = receiver.peek_messages(max_message_count=10)
        assert [body(m) for m in peeked] == [b"p1", b"p2"]


def test_empty_session_id(client, session_queue):
    send(client, session_queue, ("", "empty"))
    with client.get_queue_receiver(session_queue, session_id="", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        (m,) = receive_n(receiver, 1)
        assert body(m) == b"empty"
        assert m.session_id == ""
