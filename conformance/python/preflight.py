"""A quick check, run by TestPythonConformance before the suite: one queue
created through the management API, one message sent and received with
azure-servicebus within a few seconds. When the broker cannot serve the
Python SDK at all, this reports why at once instead of letting every test
of the suite time out."""

import os
import sys

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.management import ServiceBusAdministrationClient

from conftest import PlainHTTPTransport
from helpers import unique


def main():
    kwargs = {} if os.environ.get("BUSBAR_ADMIN_TLS") == "1" else {"transport": PlainHTTPTransport()}
    with ServiceBusAdministrationClient.from_connection_string(os.environ["BUSBAR_ADMIN_CONNECTION_STRING"], **kwargs) as admin:
        q = unique("preflight")
        admin.create_queue(q)
    with ServiceBusClient.from_connection_string(os.environ["BUSBAR_CONNECTION_STRING"], retry_total=0) as client:
        with client.get_queue_sender(q, socket_timeout=5) as sender:
            sender.send_messages(ServiceBusMessage("preflight"), timeout=8)
        with client.get_queue_receiver(q, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
            got = receiver.receive_messages(max_message_count=1, max_wait_time=8)
    if [b"".join(m.body) for m in got] != [b"preflight"]:
        sys.exit(f"preflight: received {got!r}, want one message 'preflight'")
    print("preflight: azure-servicebus created a queue, sent and received a message")


if __name__ == "__main__":
    main()
