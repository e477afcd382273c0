"""A flood of producer-id users does not take a newcomer's new ids away (issue 44): through a proxy in front of Tansu,
users by mTLS subject, ``{user: <default>} producer_ids_rate`` 1 per 30 s window (a burst of 1) and
``quota.max.tracked.entities`` at its lowest, 100.

A hundred tenants fill the table; then a flood of users, each bringing a new producer id on a Produce of its own
(raw frames over TLS, as a tenant holding many principals would), keeps it full. Each has its own bucket, made in a
full table with one token and no burst; the flood evicts its own one-off users. A newcomer's idempotent producer
(confluent-kafka: InitProducerId v3+) then goes through at once, on its own bucket: not held, not refused. Before,
every user past the cap was counted in one shared ``<overflow>`` user the flood had drained: the newcomer's id
waited 30 s for a token, past the 10 s hold bound, and was refused again and again. Counts, not timings.
"""

from __future__ import annotations

import socket
import ssl

import pytest

from proxy.codec.apis import PRODUCE
from proxy.codec.header import encode_request_header, frame
from proxy.codec.messages import encode_request, new_request
from tests.harness import Tansu, free_port, producer_id_counts, proxy_config, proxy_in_front
from tests.integration.raw import read_frame
from tests.proxy.codec.builders import record_batch

pytestmark = pytest.mark.integration

CAP, FLOOD = 100, 30
TOPIC = "flood"


def produce_with_new_id(port: int, context: ssl.SSLContext, producer_id: int) -> None:
    """One Produce v7 (acks 1) whose batch carries ``producer_id``, on a TLS connection of its own; its answer read."""
    msg = new_request(
        PRODUCE,
        7,
        acks=1,
        timeout_ms=10000,
        topic_data=[{"name": TOPIC, "partition_data": [{"index": 0, "records": record_batch(producer_id, 0, n=1)}]}],
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        with context.wrap_socket(raw) as sock:
            sock.sendall(frame(encode_request_header(PRODUCE, 7, 1, "flood") + encode_request(PRODUCE, 7, msg)))
            read_frame(sock)


def test_a_flood_of_users_each_with_a_new_id_leaves_a_newcomer_its_own_bucket(tmp_path):
    from confluent_kafka import Producer

    from tests.tls_certs import Authority

    ca = Authority(tmp_path)
    server = ca.server()
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(
        proxy_port,
        broker_port,
        quotas=[{"entity": {"user": "<default>"}, "producer_ids_rate": 1}],
        **{
            "producer.id.quota.window.num": 1,
            "producer.id.quota.window.size.seconds": 30,
            "quota.max.tracked.entities": CAP,
        },
    )
    config["listeners"][0]["tls"] = {
        "certfile": server.cert,
        "keyfile": server.key,
        "cafile": ca.pem.cert,
        "client_auth": "required",
        "principal_mapping_rules": "RULE:^CN=(.*?),OU=(.*?),.*$/$1/,DEFAULT",
    }
    with proxy_in_front(broker, config) as proxy:
        users = [f"tenant{i}" for i in range(CAP)] + [f"flood{i}" for i in range(FLOOD)]
        for pid, user in enumerate(users, 1000):  # the tenants fill the table, the flood's users evict one another
            pem = ca.client(user, C="US", O="Example", OU="ops", CN=user)
            context = ssl.create_default_context(cafile=ca.pem.cert)
            context.check_hostname = False
            context.load_cert_chain(pem.cert, pem.key)
            produce_with_new_id(proxy_port, context, pid)
        newcomer = ca.client("newcomer", C="US", O="Example", OU="ops", CN="newcomer")
        reports: list = []
        producer = Producer(
            {
                "bootstrap.servers": proxy.bootstrap,
                "enable.idempotence": True,
                "client.id": "newcomer",
                "security.protocol": "SSL",
                "ssl.ca.location": ca.pem.cert,
                "ssl.certificate.location": newcomer.cert,
                "ssl.key.location": newcomer.key,
                "ssl.endpoint.identification.algorithm": "none",
            }
        )
        producer.produce(TOPIC, b"newcomer", on_delivery=lambda err, msg: reports.append(err))
        assert producer.flush(60) == 0 and reports == [None]
        stats = {s.user: s for s in producer_id_counts(proxy)}
        assert "<overflow>" not in stats
        mine = stats["newcomer"]
        assert (mine.new_pids_total, mine.held_count, mine.refused_count) == (1, 0, 0), mine
        evicted = proxy.metric("kafka_quota_proxy_quota_overflowed_records_total", quota="producer_ids_rate")
        assert evicted == FLOOD + 1  # every user past the cap made room for itself: the table stays at 100
        assert len(stats) <= CAP  # the users scraped: those the table holds
