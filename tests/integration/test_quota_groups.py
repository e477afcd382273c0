"""Quota groups through a sidecar on Tansu, as a hostile tenant would try to escape one: two kafka-python producers
with two client ids of one prefix group, on two connections, and a third that reconnects under a new client id of
the prefix every second, get one budget between them; a bystander producing flat out beside them under
``{client-id: <default>}`` keeps its own. /metrics shows one series for the group (its name, not its members) and
/explain names the group a member resolved to. With ``settings.workers: 2`` every worker counts the group's usage,
whichever worker its members' connections are on; with ``quota.scope: cluster`` two sidecar processes give two members,
one behind each, the group's quota once."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.harness import Tansu, free_port, wait_until
from tests.integration.clients import kp_create_topic
from tests.integration.cluster_sidecars import RATE, TOPIC, Producers, shares_after_warm_up, sidecar_config
from tests.integration.faults import ProxyProcess
from tests.integration.flat_clients import VALUE, Flat, kp_flat
from tests.integration.upstreams import TansuUpstream
from tests.integration.workers import ready, samples, scrape

pytestmark = [pytest.mark.integration, pytest.mark.measures_rate]

QUOTA = 1024 * 1024  # bytes/s: large against the producers' 64 KiB batches, as in test_byte_rate
WINDOWS = 2  # quota windows of 1 s
SPANS = 6  # measured over six window spans, after the first (a new sensor's burst)
QUOTAS = [
    {"entity": {"quota-group": "jobs"}, "client-id-prefix": "job-", "producer_byte_rate": QUOTA},
    {"entity": {"client-id": "<default>"}, "producer_byte_rate": QUOTA},
]
GROUP = {"user": "<quota-group:jobs>", "client_id": ""}
BYSTANDER = {"user": "", "client_id": "bystander"}


def produced(proxy, labels: dict) -> float:
    return proxy.metric("kafka_quota_proxy_quota_bytes_total", quota="producer_byte_rate", **labels)


def rotating(bootstrap: str, topic: str):
    """A kafka-python producer flat out that closes and comes back under a new client id (job-rotating-N) every
    second: each id would have its own quota under ``{client-id: <default>}``."""

    def run(flat):
        from kafka import KafkaProducer

        n = 0
        while not flat.stop.is_set():
            p = KafkaProducer(bootstrap_servers=bootstrap, client_id=f"job-rotating-{n}", batch_size=64 * 1024, acks=1)
            until, pending = time.monotonic() + 1, []
            while time.monotonic() < until and not flat.stop.is_set():
                pending.append(p.send(topic, VALUE))
                if len(pending) >= 256:  # a few batches queued at most, as kp_flat keeps
                    pending.pop(0).get(60)
            p.flush(60)
            p.close(10)
            n += 1
        flat.acked.append(n)  # how many ids it went through

    return run


@pytest.mark.long_running(seconds=20)
def test_members_of_a_group_share_one_budget_and_a_bystander_keeps_its_own():
    settings = {"quota.window.num": WINDOWS, "quota.window.size.seconds": 1}
    upstream = TansuUpstream()
    with upstream.sidecar(QUOTAS, **settings) as proxy, upstream.topics(proxy.bootstrap, "grouped", 2) as topics:
        first, second = topics
        started = time.monotonic()
        rotor = Flat(rotating(proxy.bootstrap, second))
        members = [Flat(kp_flat(proxy.bootstrap, first, "job-1")), Flat(kp_flat(proxy.bootstrap, second, "job-2"))]
        with members[0], members[1], rotor, Flat(kp_flat(proxy.bootstrap, first, "bystander")):
            wait_until(lambda: produced(proxy, GROUP) and produced(proxy, BYSTANDER), 30, "every producer's bytes")
            time.sleep(max(0.0, started + WINDOWS - time.monotonic()))  # deliberate: past the start-up burst
            g0, b0, t0 = produced(proxy, GROUP), produced(proxy, BYSTANDER), time.monotonic()
            time.sleep(SPANS * WINDOWS)  # deliberate: the measurement window (a rate group)
            g1, b1, t1 = produced(proxy, GROUP), produced(proxy, BYSTANDER), time.monotonic()
            explained = explain(proxy, "job-rotating-99")
        group_rate, bystander_rate = (g1 - g0) / (t1 - t0), (b1 - b0) / (t1 - t0)
        print(f"group {group_rate / QUOTA:.3f} x, bystander {bystander_rate / QUOTA:.3f} x, ids {rotor.acked}")
        assert rotor.acked[0] >= 3  # the rotating producer went through several client ids
        # the group's bound is wider than the bystander's: its rotating member opens a new connection every second,
        # and a new connection is not muted until its first throttled answer (the connection escape Kafka has too,
        # docs/evasion.md): 1.01-1.03 x alone, 1.06-1.10 x beside the suite's other rate measurements. Without the
        # group each of its ids would have a quota of its own: 3 x at least
        assert 0.5 * QUOTA <= group_rate <= 1.15 * QUOTA, f"the group at {group_rate / QUOTA:.3f} x its one quota"
        assert 0.5 * QUOTA <= bystander_rate <= 1.05 * QUOTA, f"the bystander at {bystander_rate / QUOTA:.3f} x"
        throttled = proxy.metric(
            "kafka_quota_proxy_quota_throttled_responses_total", quota="producer_byte_rate", **GROUP
        )
        assert throttled > 0
        for member in ("job-1", "job-2", "job-rotating-0"):  # no series of its own: counted in the group's
            assert produced(proxy, {"user": "", "client_id": member}) == 0
        found = [f for f in explained["findings"] if f["quota"] == "producer_byte_rate"]
        assert [(f["entity"], f["limit"], f["counted_in"]) for f in found] == [
            ("/quota-groups/jobs", QUOTA, 'quota-group="jobs"')
        ]
        assert found[0]["overridden"] == ["/clients/<default> = 1048576"]


def explain(proxy, client_id: str) -> dict:
    query = urllib.parse.urlencode({"client_id": client_id, "ip": "127.0.0.1"})
    with urllib.request.urlopen(f"http://127.0.0.1:{proxy.metrics_port}/explain?{query}", timeout=10) as answer:
        return json.loads(answer.read())["answers"][0]


@pytest.mark.long_running(seconds=25)
def test_every_worker_counts_a_groups_usage_whichever_worker_its_member_is_on(tmp_path):
    """``settings.workers: 2``: a kafka-python producer of member ``a`` flat out lands on one worker; a request of
    member ``b`` would land on either. Both workers' /explain for ``b`` show the group's rate near its quota: the
    worker without ``a`` counts ``a``'s usage through the workers' shared quota state, under the group's tags."""
    from tests.integration.workers import workers_proxy

    quota = 256 * 1024
    group = f"[{{entity: {{quota-group: pair}}, client-ids: [a, b], producer_byte_rate: {quota}}}]"
    with workers_proxy(tmp_path, 2, quotas=group) as (_, bootstrap, ops_port, _):
        flat = Flat(kp_flat(bootstrap, "pair", "a"))
        with flat:

            def every_worker_sees_it() -> list[dict] | None:
                query = urllib.parse.urlencode({"client_id": "b", "ip": "127.0.0.1"})
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{ops_port}/explain?{query}", timeout=10) as answer:
                        answers = json.loads(answer.read())["answers"]
                except urllib.error.HTTPError as refused:  # 429: asked too often; ask again
                    assert refused.code == 429, refused
                    return None
                found = [f for a in answers for f in a["findings"] if f["quota"] == "producer_byte_rate"]
                seen = len(answers) == 2 and all(f["measured"] > 0.5 * quota for f in found)
                return found if seen else None

            # every 0.5 s: /explain answers a few requests a second (each asks every worker)
            found = wait_until(every_worker_sees_it, 60, "both workers measure the group's rate", interval=0.5)
        assert {(f["entity"], f["limit"]) for f in found} == {("/quota-groups/pair", quota)}


@pytest.mark.long_running(seconds=15)
def test_a_groups_members_behind_two_sidecar_processes_get_its_quota_once(tmp_path):
    """``quota.scope: cluster`` with two sidecars as two OS processes (as two pods: nothing shared but the usage
    topic) in front of one Tansu, as in test_cluster_usage.py (a on 127.0.0.1:P, b on 127.0.0.2:P): ``loader``, a
    member the group names, produces flat out through a; through b, a client id the configuration never names, of the
    group's prefix (a tenant making up ids). Together they get the group's ``producer_byte_rate`` once (0.6-1.5 x, the
    band of the other cluster tests; 2 x if each sidecar kept its own budget): each sidecar resolves the other's
    member, whichever way it is one, to the group's one budget."""

    port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"localhost:{port}").start()
    sidecars: list[tuple[ProxyProcess, int]] = []
    producers: list[Producers] = []
    try:
        for host, name in (("127.0.0.1", "a"), ("127.0.0.2", "b")):
            config = sidecar_config(host, port, broker_port, "cluster", name)
            config["quotas"] = [
                {
                    "entity": {"quota-group": "jobs"},
                    "client-ids": ["loader"],
                    "client-id-prefix": "job-",
                    "producer_byte_rate": RATE,
                }
            ]
            config["settings"]["shutdown.grace.period.ms"] = 500  # nothing in flight is waited for at the end
            metrics_port = free_port()
            config["metrics"]["bind"] = f"127.0.0.1:{metrics_port}"
            sidecars.append((ProxyProcess(config, str(tmp_path / f"{name}.yaml"), port), metrics_port))
        with ThreadPoolExecutor(2) as pool:  # side by side: each start is seconds of imports
            list(pool.map(lambda sidecar: sidecar[0].start(), sidecars))  # (each waits for a's port)
        for _, metrics_port in sidecars:
            wait_until(lambda: ready(metrics_port), 60, f"the sidecar of metrics port {metrics_port} ready")

        def fresh_peers() -> list[float]:
            return [
                samples(scrape(m), "kafka_quota_proxy_cluster_usage_peers", state="fresh").get("") for _, m in sidecars
            ]

        wait_until(lambda: fresh_peers() == [1.0, 1.0], 30, "each sidecar sees the other")
        kp_create_topic(f"127.0.0.1:{port}", TOPIC, 2)
        producers = [Producers("127.0.0.1", port, "loader"), Producers("127.0.0.2", port, f"job-{os.getpid()}")]
        for p in producers:
            p.add()
        per_sidecar = shares_after_warm_up(producers)
        producers = []
        received = [
            samples(scrape(m), "kafka_quota_proxy_cluster_usage_records_total", direction="received").get("", 0.0)
            for _, m in sidecars
        ]
    finally:
        for p in producers:
            p.running = False
        for sidecar, _ in sidecars:
            sidecar.stop()
        broker.stop()
    total = sum(per_sidecar)
    print(f"group jobs: {total:.2f} x its producer_byte_rate through two sidecars ({per_sidecar})")
    assert all(share > 0 for share in per_sidecar), f"a member got nothing through: {per_sidecar}"
    assert 0.6 <= total <= 1.5, f"{total:.2f} x the group's producer_byte_rate in total ({per_sidecar})"
    assert all(n > 0 for n in received), f"a sidecar recorded no peer usage: {received}"
