"""Topics, subscriptions and rules with azure-servicebus against Busbar."""

from azure.servicebus import ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.management import (
    CorrelationRuleFilter,
    FalseRuleFilter,
    SqlRuleAction,
    SqlRuleFilter,
    TrueRuleFilter,
)

from helpers import body, prop


def drain(client, topic, sub, wait=1):
    with client.get_subscription_receiver(topic, sub, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        got = []
        while True:
            batch = receiver.receive_messages(max_message_count=10, max_wait_time=wait)
            if not batch:
                return got
            got += batch


def set_rules(admin, topic, sub, *rules):
    admin.delete_rule(topic, sub, "$Default")
    for name, flt, action in rules:
        admin.create_rule(topic, sub, name, filter=flt, action=action)


def test_topic_filters(client, admin, make_topic):
    subs = ["all", "none", "sql", "corr-props", "corr-id", "two-rules", "action"]
    topic = make_topic(subscriptions={s: {} for s in subs})
    set_rules(admin, topic, "none", ("f", FalseRuleFilter(), None))
    set_rules(admin, topic, "all", ("t", TrueRuleFilter(), None))
    set_rules(admin, topic, "sql", ("s", SqlRuleFilter("color = 'red' AND size > 3"), None))
    set_rules(admin, topic, "corr-props", ("c", CorrelationRuleFilter(label="shapes", properties={"color": "red"}), None))
    set_rules(admin, topic, "corr-id", ("c", CorrelationRuleFilter(correlation_id="order-7"), None))
    set_rules(
        admin, topic, "two-rules",
        ("r1", SqlRuleFilter("color = 'red'"), None),
        ("r2", SqlRuleFilter("size > 3"), None),
    )
    set_rules(admin, topic, "action", ("a", SqlRuleFilter("1=1"), SqlRuleAction("SET stage = 'seen'; REMOVE size")))

    with client.get_topic_sender(topic) as sender:
        sender.send_messages(ServiceBusMessage(
            "red-big", subject="shapes", correlation_id="order-7",
            application_properties={"color": "red", "size": 5},
        ))
        sender.send_messages(ServiceBusMessage("blue-small", application_properties={"color": "blue", "size": 1}))

    got = {s: [body(m) for m in drain(client, topic, s)] for s in subs}
    assert got == {
        "all": [b"red-big", b"blue-small"],
        "none": [],
        "sql": [b"red-big"],
        "corr-props": [b"red-big"],
        "corr-id": [b"red-big"],
        "two-rules": [b"red-big"],  # both rules match: one copy
        "action": [b"red-big", b"blue-small"],
    }


def test_rule_action_changes_only_its_copy(client, admin, make_topic):
    topic = make_topic(subscriptions={"plain": {}, "changed": {}})
    set_rules(admin, topic, "changed", ("a", SqlRuleFilter("1=1"), SqlRuleAction("SET stage = 'seen'; REMOVE size")))
    with client.get_topic_sender(topic) as sender:
        sender.send_messages(ServiceBusMessage("m", application_properties={"size": 5}))
    (plain,) = drain(client, topic, "plain")
    (changed,) = drain(client, topic, "changed")
    assert prop(plain, "size") == 5 and prop(plain, "stage") is None
    assert prop(changed, "stage") == "seen" and prop(changed, "size") is None


def test_subscription_rules_through_admin(admin, make_topic):
    topic = make_topic(subscriptions={"s": {}})
    rules = {r.name: r for r in admin.list_rules(topic, "s")}
    assert list(rules) == ["$Default"]
    assert isinstance(rules["$Default"].filter, TrueRuleFilter)
    admin.create_rule(topic, "s", "by-color", filter=CorrelationRuleFilter(properties={"color": "red"}, correlation_id="c1"))
    got = admin.get_rule(topic, "s", "by-color")
    assert isinstance(got.filter, CorrelationRuleFilter)
    assert got.filter.correlation_id == "c1"
    assert got.filter.properties == {"color": "red"}
    got.filter = SqlRuleFilter("color = @c", parameters={"@c": "blue"})
    got.action = SqlRuleAction("SET seen = 1")
    admin.update_rule(topic, "s", got)
    again = admin.get_rule(topic, "s", "by-color")
    assert isinstance(again.filter, SqlRuleFilter)
    assert again.filter.sql_expression == "color = @c"
    assert again.filter.parameters == {"@c": "blue"}
    assert again.action.sql_expression == "SET seen = 1"
    admin.delete_rule(topic, "s", "by-color")
    assert [r.name for r in admin.list_rules(topic, "s")] == ["$Default"]
