"""Errors the Python SDK reports against Busbar: a wrong key, an unknown entity."""

import re

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusAuthenticationError

from helpers import unique


def wrong_key(conn_str):
    return re.sub(r"SharedAccessKey=[^;]*", "SharedAccessKey=" + "A" * 43 + "=", conn_str)


def test_wrong_key(conn_str, client, make_queue):
    q = make_queue()
    with ServiceBusClient.from_connection_string(wrong_key(conn_str), retry_total=0) as bad:
        with pytest.raises(ServiceBusAuthenticationError):
            with bad.get_queue_sender(q) as sender:
                sender.send_messages(ServiceBusMessage("nope"))
        with pytest.raises(ServiceBusAuthenticationError):
            with bad.get_queue_receiver(q) as receiver:
                receiver.receive_messages(max_message_count=1, max_wait_time=1)
    with client.get_queue_receiver(q) as receiver:
        assert receiver.peek_messages(max_message_count=1) == []


def test_unknown_entity(conn_str):
    # Busbar answers a put-token for an entity that does not exist with 404,
    # as Service Bus does; the Python SDK reports every failed put-token as
    # ServiceBusAuthenticationError.
    name = unique("missing")
    with ServiceBusClient.from_connection_string(conn_str, retry_total=0) as c:
        calls = {
            "send": lambda: c.get_queue_sender(name).__enter__().send_messages(ServiceBusMessage("x")),
            "receive": lambda: c.get_queue_receiver(name).__enter__().receive_messages(max_message_count=1, max_wait_time=1),
            "peek": lambda: c.get_queue_receiver(name).__enter__().peek_messages(max_message_count=1),
            "named session": lambda: c.get_queue_receiver(name, session_id="s").__enter__(),
            "next session": lambda: c.get_queue_receiver(name, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=1).__enter__(),
            "subscription": lambda: c.get_subscription_receiver(name, "sub").__enter__(),
        }
        for what, call in calls.items():
            with pytest.raises(ServiceBusAuthenticationError):
                call()
