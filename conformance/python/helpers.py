"""Helpers of the Python conformance suite's tests."""

import itertools
import os
import time

_counter = itertools.count()


def unique(prefix):
    """A name unique to this run (and to this process: pytest-xdist runs
    the tests in several)."""
    run = os.environ.get("BUSBAR_CONFORMANCE_RUN_ID") or format(time.time_ns() & 0xFFFFFFFFFF, "x")
    return f"py-{prefix}-{os.getpid()}-{next(_counter)}-{run}"

def receive_n(receiver, n, max_wait_time=10):
    """Receives exactly n messages (failing after max_wait_time seconds)."""
    got = []
    deadline = time.monotonic() + max_wait_time
    while len(got) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"received {len(got)} of {n} messages in {max_wait_time} s")
        got += receiver.receive_messages(max_message_count=n - len(got), max_wait_time=left)
    return got


def body(message):
    """A received message's body as bytes."""
    return b"".join(message.body)


def prop(message, key):
    """An application property of a received message (the SDK keys them by bytes)."""
    props = message.application_properties or {}
    value = props.get(key.encode(), props.get(key))
    return value.decode() if isinstance(value, bytes) else value
