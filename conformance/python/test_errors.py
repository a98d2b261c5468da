"""Credentials and errors with the Python SDK against Busbar: a wrong key,
an unknown entity, named-key and SAS credentials."""

import base64
import hashlib
import hmac
import re
import time
import urllib.parse

import pytest
from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
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


def test_credentials(conn_str, make_queue):
    # A named key credential and a SAS token (in a connection string and as
    # AzureSasCredential) signed for the namespace, and one for the entity.
    q = make_queue()
    fields = dict(part.split("=", 1) for part in conn_str.split(";") if "=" in part)
    host = fields["Endpoint"].split("//", 1)[1].rstrip("/")
    name, key = fields["SharedAccessKeyName"], fields["SharedAccessKey"]
    namespace_sas = sas_token("sb://" + host.split(":")[0] + "/", name, key)
    clients = {
        "named key": ServiceBusClient(host, AzureNamedKeyCredential(name, key), use_tls=False, retry_total=0),
        "sas credential": ServiceBusClient(host, AzureSasCredential(namespace_sas), use_tls=False, retry_total=0),
        "sas connection string": ServiceBusClient.from_connection_string(
            f"Endpoint=sb://{host};SharedAccessSignature={namespace_sas};UseDevelopmentEmulator=true", retry_total=0),
        "entity sas": ServiceBusClient.from_connection_string(
            f"Endpoint=sb://{host};SharedAccessSignature={sas_token(f'sb://{host}/{q}', name, key)};UseDevelopmentEmulator=true",
            retry_total=0),
    }
    for label, c in clients.items():
        with c:
            with c.get_queue_sender(q) as sender:
                sender.send_messages(ServiceBusMessage(label))
            with c.get_queue_receiver(q, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
                got = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert [str(m) for m in got] == [label]


def sas_token(uri, key_name, key, ttl=3600):
    """A Service Bus SAS token for uri."""
    expiry = str(int(time.time() + ttl))
    encoded = urllib.parse.quote_plus(uri)
    sig = base64.b64encode(hmac.new(key.encode(), f"{encoded}\n{expiry}".encode(), hashlib.sha256).digest())
    return f"SharedAccessSignature sr={encoded}&sig={urllib.parse.quote_plus(sig)}&se={expiry}&skn={key_name}"
