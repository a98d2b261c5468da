"""Further paths of the Python SDK: deferred messages settled on the
management link, receive-and-delete of deferred messages, a message over
the size limit, auto-forwarding, a subscription's dead-letter queue, AMQP
over WebSockets, every section and body kind of an AmqpAnnotatedMessage, and
the asyncio client."""

import asyncio

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode, ServiceBusSubQueue, TransportType
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType, AmqpMessageHeader, AmqpMessageProperties
from azure.servicebus.exceptions import MessageSizeExceededError

from helpers import body, receive_n


def test_deferred_settled_on_management_link(client, make_queue):
    q = make_queue()
    with client.get_queue_sender(q) as sender:
        sender.send_messages([ServiceBusMessage(f"d{i}") for i in range(3)])
    with client.get_queue_receiver(q) as receiver:
        got = receive_n(receiver, 3)
        for m in got:
            receiver.defer_message(m)
        seqs = [m.sequence_number for m in got]
        d0, d1, d2 = receiver.receive_deferred_messages(seqs)
        before = d0.locked_until_utc
        assert receiver.renew_message_lock(d0) >= before
        receiver.complete_message(d0)
        receiver.dead_letter_message(d1, reason="deferred-bad", error_description="from a deferred message")
        receiver.abandon_message(d2)
        # Abandoned, a deferred message stays deferred.
        (again,) = receiver.receive_deferred_messages([seqs[2]])
        assert body(again) == b"d2"
        receiver.complete_message(again)
        assert receiver.peek_messages(max_message_count=10, sequence_number=1) == []
    with client.get_queue_receiver(q, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (d,) = receive_n(dlq, 1)
        assert (body(d), d.dead_letter_reason) == (b"d1", "deferred-bad")


def test_receive_deferred_and_delete(client, make_queue):
    q = make_queue()
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage("later"))
    with client.get_queue_receiver(q) as receiver:
        (m,) = receive_n(receiver, 1)
        receiver.defer_message(m)
    with client.get_queue_receiver(q, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        (d,) = receiver.receive_deferred_messages([m.sequence_number])
        assert body(d) == b"later"
        assert d.lock_token is None
        assert receiver.peek_messages(max_message_count=5, sequence_number=1) == []


def test_message_over_the_limit(client, make_queue):
    q = make_queue(max_message_size_in_kilobytes=256)
    with client.get_queue_sender(q) as sender:
        with pytest.raises(MessageSizeExceededError):
            sender.send_messages(ServiceBusMessage(b"x" * (300 * 1024)))
        sender.send_messages(ServiceBusMessage(b"y" * (200 * 1024)))
    with client.get_queue_receiver(q, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        (m,) = receive_n(receiver, 1)
        assert len(body(m)) == 200 * 1024


def test_auto_forward(client, make_queue, make_topic):
    target = make_queue("target")
    topic = make_topic(subscriptions={"fwd": {"forward_to": target}})
    with client.get_topic_sender(topic) as sender:
        sender.send_messages(ServiceBusMessage("hop"))
    with client.get_queue_receiver(target, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        (m,) = receive_n(receiver, 1)
        assert body(m) == b"hop"


def test_subscription_dead_letter_queue(client, make_topic):
    topic = make_topic(subscriptions={"s": {}})
    with client.get_topic_sender(topic) as sender:
        sender.send_messages(ServiceBusMessage("bad"))
    with client.get_subscription_receiver(topic, "s") as receiver:
        (m,) = receive_n(receiver, 1)
        receiver.dead_letter_message(m, reason="r", error_description="d")
    with client.get_subscription_receiver(topic, "s", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (d,) = receive_n(dlq, 1)
        assert (body(d), d.dead_letter_reason, d.dead_letter_error_description) == (b"bad", "r", "d")
        dlq.complete_message(d)


def test_asyncio_client(conn_str, make_queue):
    q = make_queue("sq", requires_session=True)

    async def run():
        async with AsyncServiceBusClient.from_connection_string(conn_str) as c:
            async with c.get_queue_sender(q) as sender:
                await sender.send_messages([ServiceBusMessage(f"a{i}", session_id="s") for i in range(3)])
            async with c.get_queue_receiver(q, session_id="s") as receiver:
                await receiver.session.set_state(b"async")
                got = []
                while len(got) < 3:
                    got += await receiver.receive_messages(max_message_count=3, max_wait_time=5)
                for m in got:
                    await receiver.complete_message(m)
                return [body(m) for m in got], await receiver.session.get_state()

    bodies, state = asyncio.run(run())
    assert bodies == [b"a0", b"a1", b"a2"]
    assert state == b"async"


def test_websockets(conn_str, admin_conn_str, make_queue):
    # AMQP over WebSockets (subprotocol AMQPWSB10) on the HTTP listener: the
    # SDK dials ws://<custom endpoint>/$servicebus/websocket.
    http_host = admin_conn_str.split("Endpoint=", 1)[1].split(";", 1)[0]
    q = make_queue()
    payload = bytes(range(256)) * 512  # 128 KB, several WebSocket frames
    with ServiceBusClient.from_connection_string(
        conn_str, transport_type=TransportType.AmqpOverWebsocket, custom_endpoint_address=http_host
    ) as c:
        with c.get_queue_sender(q) as sender:
            sender.send_messages(ServiceBusMessage(payload))
        with c.get_queue_receiver(q, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
            (m,) = receive_n(receiver, 1)
    assert body(m) == payload


def test_amqp_annotated_message_sections(client, make_queue):
    # Every section and body kind the SDK can send comes back; pyamqp
    # writes delivery annotations after the footer.
    q = make_queue()
    sent = [
        AmqpAnnotatedMessage(
            value_body={"k": 1, "s": "v"},
            annotations={"custom-annotation": "x"},
            application_properties={"p": 1},
            footer={"f": "foot"},
            delivery_annotations={"da": 1},
        ),
        AmqpAnnotatedMessage(sequence_body=[[1, 2, "three"]]),
        AmqpAnnotatedMessage(data_body=[b"part1", b"part2"]),
        AmqpAnnotatedMessage(
            value_body="a string",
            header=AmqpMessageHeader(priority=7, durable=True),
            properties=AmqpMessageProperties(message_id="mid", user_id=b"uid", group_sequence=5, content_encoding="gzip"),
        ),
    ]
    with client.get_queue_sender(q) as sender:
        for m in sent:
            sender.send_messages(m)
    with client.get_queue_receiver(q, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        got = [m.raw_amqp_message for m in receive_n(receiver, 4)]
    assert got[0].body_type == AmqpMessageBodyType.VALUE and got[0].body == {b"k": 1, b"s": b"v"}
    assert got[0].annotations[b"custom-annotation"] == b"x"
    assert got[0].footer == {b"f": b"foot"}
    assert got[0].delivery_annotations[b"da"] == 1
    assert got[1].body_type == AmqpMessageBodyType.SEQUENCE and list(got[1].body) == [[1, 2, b"three"]]
    assert got[2].body_type == AmqpMessageBodyType.DATA and list(got[2].body) == [b"part1", b"part2"]
    assert got[3].body == b"a string"
    assert (got[3].header.priority, got[3].header.durable) == (7, True)
    assert (got[3].properties.user_id, got[3].properties.group_sequence, got[3].properties.content_encoding) == (b"uid", 5, b"gzip")
