"""The toolbox of the proxy's own Kafka traffic (proxy.cluster.kafka_clients): pure parts, and one request to a
scripted broker."""

from __future__ import annotations

import asyncio

import pytest

from config.model import Address
from proxy.cluster.kafka_clients import ASK_ERRORS, Backoff, OwnKafka, ask, cluster_look
from proxy.codec.apis import API_VERSIONS, METADATA, OWN_METADATA_VERSION
from proxy.codec.error_codes import TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION
from proxy.codec.messages import new_request, new_response


def test_the_backoff_doubles_up_to_its_bound_and_starts_again_after_a_success():
    backoff = Backoff(0.2, 1.0)
    assert [backoff.failed() for _ in range(5)] == [0.2, 0.4, 0.8, 1.0, 1.0]
    backoff.succeeded()
    assert backoff.failed() == 0.2


def test_the_cluster_look_reads_a_metadata_answer():
    """Brokers, partitions, a missing topic (no partitions) and another error (nothing can be told of it)."""
    msg = new_response(
        METADATA,
        OWN_METADATA_VERSION,
        brokers=[{"node_id": 3, "host": "h", "port": 9}],
        topics=[
            {"name": "a", "partitions": [{"partition_index": 0}, {"partition_index": 1}]},
            {"name": "gone", "error_code": UNKNOWN_TOPIC_OR_PARTITION},
            {"name": "secret", "error_code": TOPIC_AUTHORIZATION_FAILED},
        ],
    )
    look = cluster_look(msg)
    assert look.brokers == {3: Address("h", 9)}
    assert look.partitions == {"a": frozenset({0, 1}), "gone": frozenset()}
    assert look.errors == {"secret": "TOPIC_AUTHORIZATION_FAILED"}


def test_the_own_clients_options_carry_every_bootstrap_server_and_the_tls_context():
    plain = OwnKafka((Address("a", 1), Address("b", 2)))
    assert plain.options("me") == {"bootstrap_servers": ["a:1", "b:2"], "client_id": "me"}
    context = object()
    assert OwnKafka((Address("a", 1),), context).options("me") == {
        "bootstrap_servers": ["a:1"],
        "client_id": "me",
        "security_protocol": "SSL",
        "ssl_context": context,
    }


def test_ask_answers_the_decoded_response_and_a_silent_broker_is_a_bounded_failure():
    from tests.scripted_broker import ScriptedBroker, answer_normally

    silent = []

    def answer(sock, header, request):
        if header.api_key == METADATA:
            silent.append(header)  # never answered
        else:
            answer_normally(sock, header, request)

    broker = ScriptedBroker(answer).start()
    try:
        address = Address("127.0.0.1", broker.port)

        async def run():
            versions = await ask(address, API_VERSIONS, 0, new_request(API_VERSIONS, 0), 5.0)
            assert versions.error_code == 0 and versions.api_keys
            with pytest.raises(ASK_ERRORS):
                await ask(address, METADATA, OWN_METADATA_VERSION, new_request(METADATA, OWN_METADATA_VERSION), 0.3)
            assert await OwnKafka((address,)).look(["t"], 0.3) is None  # no bootstrap server answered

        asyncio.run(run())
    finally:
        broker.stop()
