"""``/explain`` as a tenant who can reach the ops port would try it: every malformed query is a 400 saying why,
asking about made-up clients makes nothing, answers are rate-limited; the parent of workers gathers its workers'
answers and names the ones that did not answer."""

from __future__ import annotations

import asyncio
import json

import pytest

from config.loader import parse_config
from proxy.app import ProxyApp
from proxy.ops.explain import Explainer, Limiter, QueryError, parse_query
from proxy.workers.explain import WorkersExplainer
from tests.harness import proxy_config

LISTENERS = ("PLAINTEXT",)


@pytest.mark.parametrize(
    "query, why",
    [
        (b"", "missing client_id, ip"),
        (b"client_id=etl", "missing ip"),
        (b"client_id=etl&ip=10.0.0.x", "not an IP address"),
        (b"client_id=etl&ip=10.0.0.1&ip=10.0.0.2", "ip given more than once"),
        (b"client_id=etl&ip=10.0.0.1&sensor=make", "unknown parameter 'sensor'"),
        (b"client_id=etl&ip=10.0.0.1&listener=NOPE", "no listener 'NOPE'"),
        (b"client_id=%ff%fe&ip=10.0.0.1", "cannot read the query"),
        (b"client_id=\xff&ip=10.0.0.1", "cannot read the query"),
        (b"a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8", "cannot read the query"),  # more fields than there are parameters
        (b"client_id=etl&ip=10.0.0.1&partition=3", "give topic too"),
        (b"client_id=etl&ip=10.0.0.1&topic=t&partition=-3", "not a partition index"),
        (b"client_id=etl&ip=10.0.0.1&topic=t&partition=03", "not a partition index"),
        (b"client_id=" + b"x" * 1025 + b"&ip=10.0.0.1", "longer than 1024"),
    ],
)
def test_a_malformed_query_is_refused_saying_why(query, why):
    with pytest.raises(QueryError, match=why):
        parse_query(query, LISTENERS)


def test_a_query_names_the_client_as_the_connections_do():
    who = parse_query(b"user=User%3Aalice&client_id=&ip=%3A%3Affff%3A10.0.0.1&listener=PLAINTEXT", LISTENERS)
    assert (who.user, who.client_id, who.ip, who.listener) == ("User:alice", "", "10.0.0.1", "PLAINTEXT")
    assert parse_query(b"client_id=etl&ip=::1", LISTENERS).user == "ANONYMOUS"


def test_asking_about_made_up_clients_makes_nothing_and_is_rate_limited():
    app = ProxyApp(
        parse_config(
            proxy_config(
                1,
                2,
                quotas=[
                    {
                        "entity": {"client-id": "<default>"},
                        "producer_byte_rate": 1000,
                        "consumer_byte_rate": 1000,
                        "controller_mutation_rate": 10,
                    },
                    {"entity": {"user": "<default>"}, "producer_ids_rate": 10},
                    {"entity": {"ip": "<default>"}, "connection_creation_rate": 5},
                ],
            )
        )
    )
    quotas = app.quotas
    app.explainer = Explainer(app, Limiter(clock=lambda: 0.0))  # the twelve asked in one instant, however slow

    def sizes():
        return (
            len(quotas.produce),
            len(quotas.fetch),
            len(quotas.mutations),
            len(quotas.producer_ids),
            app.connection_quotas.tracked_ips,
        )

    answers = [app.explainer.answer(f"user=u{i}&client_id=c{i}&ip=10.0.{i}.1".encode()) for i in range(12)]
    assert [status for status, _, _ in answers] == ["200 OK"] * 10 + ["429 Too Many Requests"] * 2
    assert sizes() == (0, 0, 0, 0, 0)
    whole = json.loads(answers[0][2])
    assert (whole["verdict"], whole["unanswered"], len(whole["answers"])) == ("NOT_THROTTLED", [], 1)
    produce = next(f for f in whole["answers"][0]["findings"] if f["quota"] == "producer_byte_rate")
    assert (produce["entity"], produce["level"], produce["verdict"]) == ("/clients/<default>", 8, "WITHIN")


def test_a_limiter_refills_at_its_rate():
    now = [0.0]
    limiter = Limiter(2.0, clock=lambda: now[0])
    assert [limiter.allow() for _ in range(3)] == [True, True, False]
    now[0] += 0.5
    assert [limiter.allow(), limiter.allow()] == [True, False]


def test_the_parent_gathers_every_workers_answer_and_names_those_that_did_not_answer():
    def fetch(port: int, query: bytes) -> dict:
        if port == 9002:
            raise OSError("connection refused")
        return {"worker": None, "verdict": "THROTTLED" if port == 9001 else "NOT_THROTTLED", "port": port}

    parent = WorkersExplainer(LISTENERS, lambda: [(0, 9000), (1, 9001), (2, 9002)], lambda: "a note", fetch)
    status, _, body = asyncio.run(parent.answer(b"client_id=etl&ip=10.0.0.1"))
    whole = json.loads(body)
    assert status == "200 OK" and whole["verdict"] == "THROTTLED" and whole["note"] == "a note"
    assert [(a["worker"], a["port"]) for a in whole["answers"]] == [("0", 9000), ("1", 9001)]
    assert whole["unanswered"] == ["2"]
    assert asyncio.run(parent.answer(b"client_id=etl"))[0] == "400 Bad Request"
    silent = WorkersExplainer(LISTENERS, lambda: [(2, 9002)], lambda: None, fetch)
    whole = json.loads(asyncio.run(silent.answer(b"client_id=etl&ip=10.0.0.1"))[2])
    assert (whole["verdict"], whole["answers"], whole["unanswered"]) == ("UNKNOWN", [], ["2"])


def test_an_answer_that_fails_is_a_500_and_the_endpoint_goes_on(caplog):
    from prometheus_client import CollectorRegistry

    from proxy.ops.http import OpsServer

    async def failing(query: bytes):
        raise RuntimeError("a bug")

    async def run() -> list[bytes]:
        server = OpsServer(CollectorRegistry(), lambda: None, explain=failing)
        host, port = await server.start("127.0.0.1", 0)
        answers = []
        for target in (b"/explain?client_id=etl&ip=10.0.0.1", b"/healthz"):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            answers.append(await reader.read())
            writer.close()
        await server.close()
        return answers

    failed, healthy = asyncio.run(run())
    assert failed.startswith(b"HTTP/1.1 500") and healthy.startswith(b"HTTP/1.1 200")
    assert "explain: the answer failed" in caplog.text
