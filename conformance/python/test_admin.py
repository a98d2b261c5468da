"""ServiceBusAdministrationClient against Busbar's management API."""

import datetime

import pytest
from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.servicebus import ServiceBusMessage
from azure.servicebus.management import QueueProperties

from helpers import unique

SECOND = datetime.timedelta(seconds=1)


def test_queue_lifecycle(admin):
    name = unique("admin-q")
    created = admin.create_queue(
        name,
        lock_duration=30 * SECOND,
        max_delivery_count=7,
        requires_session=True,
        dead_lettering_on_message_expiration=True,
        default_message_time_to_live=datetime.timedelta(hours=2),
        user_metadata="made by pytest",
    )
    assert isinstance(created, QueueProperties)
    got = admin.get_queue(name)
    assert got.name == name
    assert got.lock_duration == 30 * SECOND
    assert got.max_delivery_count == 7
    assert got.requires_session is True
    assert got.dead_lettering_on_message_expiration is True
    assert got.default_message_time_to_live == datetime.timedelta(hours=2)
    assert got.user_metadata == "made by pytest"
    assert got.status == "Active"
    with pytest.raises(ResourceExistsError):
        admin.create_queue(name)

    got.max_delivery_count = 3
    got.lock_duration = 45 * SECOND
    admin.update_queue(got)
    updated = admin.get_queue(name)
    assert (updated.max_delivery_count, updated.lock_duration) == (3, 45 * SECOND)

    assert name in [q.name for q in admin.list_queues()]
    admin.delete_queue(name)
    with pytest.raises(ResourceNotFoundError):
        admin.get_queue(name)
    assert name not in [q.name for q in admin.list_queues()]


def test_topic_and_subscription_lifecycle(admin):
    topic = unique("admin-t")
    admin.create_topic(topic, default_message_time_to_live=datetime.timedelta(hours=1), max_size_in_megabytes=2048)
    got = admin.get_topic(topic)
    assert got.name == topic
    assert got.default_message_time_to_live == datetime.timedelta(hours=1)
    assert got.max_size_in_megabytes == 2048
    got.default_message_time_to_live = datetime.timedelta(hours=3)
    admin.update_topic(got)
    assert admin.get_topic(topic).default_message_time_to_live == datetime.timedelta(hours=3)
    assert topic in [t.name for t in admin.list_topics()]

    admin.create_subscription(topic, "sub", requires_session=True, max_delivery_count=4)
    sub = admin.get_subscription(topic, "sub")
    assert (sub.name, sub.requires_session, sub.max_delivery_count) == ("sub", True, 4)
    sub.max_delivery_count = 9
    admin.update_subscription(topic, sub)
    assert admin.get_subscription(topic, "sub").max_delivery_count == 9
    admin.create_subscription(topic, "other")
    assert sorted(s.name for s in admin.list_subscriptions(topic)) == ["other", "sub"]
    admin.delete_subscription(topic, "other")
    assert [s.name for s in admin.list_subscriptions(topic)] == ["sub"]
    with pytest.raises(ResourceNotFoundError):
        admin.get_subscription(topic, "other")

    admin.delete_topic(topic)
    with pytest.raises(ResourceNotFoundError):
        admin.get_topic(topic)


def test_runtime_properties(admin, client, make_queue, make_topic):
    q = make_queue()
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    with client.get_queue_sender(q) as sender:
        sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b"), ServiceBusMessage("dead")])
        sender.schedule_messages(ServiceBusMessage("later"), at)
    with client.get_queue_receiver(q) as receiver:
        (m,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.dead_letter_message(m, reason="test")
    rt = admin.get_queue_runtime_properties(q)
    assert rt.name == q
    assert (rt.active_message_count, rt.dead_letter_message_count, rt.scheduled_message_count) == (2, 1, 1)
    assert rt.total_message_count == 4
    assert rt.size_in_bytes > 0
    assert q in [r.name for r in admin.list_queues_runtime_properties()]

    topic = make_topic(subscriptions={"s1": {}, "s2": {}})
    with client.get_topic_sender(topic) as sender:
        sender.send_messages(ServiceBusMessage("fan-out"))
    trt = admin.get_topic_runtime_properties(topic)
    assert trt.subscription_count == 2
    assert topic in [t.name for t in admin.list_topics_runtime_properties()]
    srt = admin.get_subscription_runtime_properties(topic, "s1")
    assert (srt.active_message_count, srt.total_message_count) == (1, 1)
    assert sorted(s.name for s in admin.list_subscriptions_runtime_properties(topic)) == ["s1", "s2"]


def test_namespace_properties(admin):
    ns = admin.get_namespace_properties()
    assert ns.name
    assert ns.messaging_sku in ("Standard", "Premium")


def test_unknown_entities(admin):
    with pytest.raises(ResourceNotFoundError):
        admin.get_queue("no-such-queue-" + unique("x"))
    with pytest.raises(ResourceNotFoundError):
        admin.get_queue_runtime_properties("no-such-queue-" + unique("x"))
    with pytest.raises(ResourceNotFoundError):
        admin.delete_topic("no-such-topic-" + unique("x"))
