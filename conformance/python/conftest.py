"""Fixtures of the Python conformance suite (azure-servicebus, pytest).

The suite runs against the broker named by BUSBAR_CONNECTION_STRING (the Go
test TestPythonConformance starts a child `busbar serve` and sets it). The
management API is reached with BUSBAR_ADMIN_CONNECTION_STRING: the same
connection string with the HTTP listener's address as its Endpoint. Every
test creates its own entities through ServiceBusAdministrationClient, with
names unique to the run (BUSBAR_CONFORMANCE_RUN_ID).
"""

import os

import pytest
from azure.core.pipeline.transport import RequestsTransport
from azure.servicebus import ServiceBusClient
from azure.servicebus.management import ServiceBusAdministrationClient

from helpers import unique


def _env(name):
    value = os.environ.get(name)
    if not value:
        pytest.exit(f"{name} is not set (run the suite through `go test ./conformance/ -run TestPython`)", returncode=2)
    return value


class PlainHTTPTransport(RequestsTransport):
    """Sends the admin client's requests over plain HTTP.

    ServiceBusAdministrationClient always builds https:// URLs (it ignores
    UseDevelopmentEmulator); Busbar's management API on a loopback port
    speaks plain HTTP, as the emulator's does.
    """

    def send(self, request, **kwargs):
        if request.url.startswith("https://"):
            request.url = "http://" + request.url[len("https://"):]
        return super().send(request, **kwargs)


@pytest.fixture(scope="session")
def conn_str():
    return _env("BUSBAR_CONNECTION_STRING")


@pytest.fixture(scope="session")
def admin_conn_str():
    return _env("BUSBAR_ADMIN_CONNECTION_STRING")


@pytest.fixture(scope="session")
def admin(admin_conn_str):
    kwargs = {}
    if os.environ.get("BUSBAR_ADMIN_TLS") != "1":
        kwargs["transport"] = PlainHTTPTransport()
    with ServiceBusAdministrationClient.from_connection_string(admin_conn_str, **kwargs) as client:
        yield client


@pytest.fixture
def client(conn_str):
    with ServiceBusClient.from_connection_string(conn_str) as c:
        yield c


@pytest.fixture
def make_queue(admin):
    """Creates a queue with the given properties; returns its name."""

    def make(prefix="q", **props):
        name = unique(prefix)
        admin.create_queue(name, **props)
        return name

    return make


@pytest.fixture
def make_topic(admin):
    """Creates a topic and subscriptions ({name: props}); returns its name."""

    def make(prefix="t", subscriptions=None, **props):
        name = unique(prefix)
        admin.create_topic(name, **props)
        for sub, sub_props in (subscriptions or {}).items():
            admin.create_subscription(name, sub, **sub_props)
        return name

    return make
