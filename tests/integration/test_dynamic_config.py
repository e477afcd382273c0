"""The dynamic configuration against Tansu: the `configs` CLI (kafka-python) writes the config topic, the proxy
follows it and applies changes to live traffic within a second; bad records change nothing; a broker outage keeps
the configuration in force."""

from __future__ import annotations

import time
import urllib.request

import pytest

from config.dynamic import entity_key
from proxy.cli.configs import main as configs
from tests.harness import Tansu, free_port, proxy_config, start_proxy, wait_until
from tests.integration.clients import kp_delete_topic
from tests.integration.quota_apis import described, write_config_entry

pytestmark = pytest.mark.integration

TOPIC = "__kafka_quota_proxy_configs"


@pytest.fixture
def cluster():
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(
        proxy_port, broker_port, quotas=[{"entity": {"user": "<default>"}, "consumer_byte_rate": 123456}]
    )
    config["admin_principals"] = ["User:ANONYMOUS"]  # the tests' own clients may write and delete the config topic
    # no dynamic_config section: the default topic is followed
    try:
        proxy = start_proxy(config)
    except BaseException:
        broker.stop()
        raise
    try:
        yield proxy, broker
    finally:
        try:
            proxy.stop()
        finally:
            broker.stop()


def test_configs_cli_alters_describes_and_deletes_and_the_proxy_follows(cluster, capsys):
    proxy, _ = cluster
    bootstrap = proxy.bootstrap
    assert (
        configs(
            [
                "--bootstrap-server",
                bootstrap,
                "--alter",
                "--entity-type",
                "clients",
                "--entity-name",
                "dyn",
                "--add-config",
                "producer_byte_rate=2048,controller_mutation_rate=5",
            ]
        )
        == 0
    )
    assert "producer_byte_rate: (unset) -> 2048" in capsys.readouterr().out
    # how soon: test_a_change_is_in_force_within_about_a_second, in a rate group
    wait_until(
        lambda: (
            described(bootstrap, {"client-id": "dyn"}) == {"producer_byte_rate": 2048, "controller_mutation_rate": 5}
        ),
        15,
        "dyn's 2048 in force",
    )
    assert described(bootstrap, {"user": None}) == {"consumer_byte_rate": 123456}  # the YAML stays under it
    assert (
        configs(["--bootstrap-server", bootstrap, "--describe", "--entity-type", "clients", "--entity-name", "dyn"])
        == 0
    )
    assert (
        "Quota configs for client-id dyn are controller_mutation_rate=5, producer_byte_rate=2048"
        in capsys.readouterr().out
    )
    assert (
        configs(
            [
                "--bootstrap-server",
                bootstrap,
                "--alter",
                "--entity-type",
                "clients",
                "--entity-name",
                "dyn",
                "--delete-config",
                "producer_byte_rate",
            ]
        )
        == 0
    )
    wait_until(
        lambda: described(bootstrap, {"client-id": "dyn"}) == {"controller_mutation_rate": 5},
        5,
        "dyn's producer_byte_rate deleted, its controller_mutation_rate kept",
    )
    # a bad value is refused by the proxy (AlterClientQuotas INVALID_REQUEST), nothing written
    assert (
        configs(
            [
                "--bootstrap-server",
                bootstrap,
                "--alter",
                "--entity-type",
                "users",
                "--entity-default",
                "--add-config",
                "producer_byte_rate=-1",
            ]
        )
        == 1
    )
    assert "producer_byte_rate" in capsys.readouterr().err


def test_a_bad_record_is_counted_and_the_last_good_configuration_stays(cluster):
    from kafka import KafkaProducer

    proxy, _ = cluster
    assert (
        configs(
            [
                "--bootstrap-server",
                proxy.bootstrap,
                "--alter",
                "--entity-type",
                "users",
                "--entity-name",
                "alice",
                "--add-config",
                "producer_byte_rate=4096",
            ]
        )
        == 0
    )
    wait_until(
        lambda: described(proxy.bootstrap, {"user": "alice"}) == {"producer_byte_rate": 4096},
        5,
        "alice's 4096 in force",
    )
    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap)
    try:
        producer.send(TOPIC, key=entity_key({"user": "alice"}), value=b'{"producer_byte_rate": "lots"}').get(10)
        producer.send(TOPIC, key=b"garbage", value=b"{}").get(10)
    finally:
        producer.close(5)
    wait_until(
        lambda: proxy.metric("kafka_quota_proxy_dynamic_config_bad_records_total") == 2, 5, "2 bad records counted"
    )
    assert described(proxy.bootstrap, {"user": "alice"}) == {"producer_byte_rate": 4096}


def test_a_broker_outage_keeps_the_dynamic_configuration_in_force(cluster):
    proxy, broker = cluster
    assert (
        configs(
            [
                "--bootstrap-server",
                proxy.bootstrap,
                "--alter",
                "--entity-type",
                "ips",
                "--entity-name",
                "10.9.9.9",
                "--add-config",
                "connection_creation_rate=7",
            ]
        )
        == 0
    )

    def ip_limits():  # the connection quotas' own limits, as /metrics shows them (the broker down: no describe)
        return proxy.scraped("kafka_quota_proxy_ip_connection_creation_rate_limit")

    wait_until(lambda: ip_limits() == {(("ip", "10.9.9.9"),): 7}, 5, "10.9.9.9's rate 7 in force")
    broker.stop()
    wait_until(
        lambda: proxy.metric("kafka_quota_proxy_dynamic_config_last_read_age_seconds") > 1.5,
        15,
        "the config topic unread for 1.5 s",
    )
    assert ip_limits() == {(("ip", "10.9.9.9"),): 7}


def test_changes_reach_live_traffic(cluster):
    """A producer running flat out is throttled within a second of its quota being written, and free again
    within a second of it being deleted."""
    from kafka import KafkaProducer

    proxy, _ = cluster
    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="live", linger_ms=5)

    def throttled():
        return proxy.metric(
            "kafka_quota_proxy_quota_throttled_responses_total",
            quota="producer_byte_rate",
            user="",
            client_id="live",
        )

    try:
        for _ in range(200):
            producer.send("live", b"x" * 1000)
        producer.flush(30)
        assert throttled() == 0
        assert (
            configs(
                [
                    "--bootstrap-server",
                    proxy.bootstrap,
                    "--alter",
                    "--entity-type",
                    "clients",
                    "--entity-name",
                    "live",
                    "--add-config",
                    "producer_byte_rate=20000",
                ]
            )
            == 0
        )
        wait_until(
            lambda: described(proxy.bootstrap, {"client-id": "live"}) == {"producer_byte_rate": 20000},
            5,
            "live's 20000 in force",
        )
        deadline = time.monotonic() + 20
        while throttled() == 0 and time.monotonic() < deadline:
            for _ in range(100):
                producer.send("live", b"x" * 1000)
            producer.flush(60)
        assert throttled() > 0
        assert (
            proxy.metric("kafka_quota_proxy_quota_limit", quota="producer_byte_rate", user="", client_id="live")
            == 20000
        )
    finally:
        producer.close(5)
    assert proxy.metric("kafka_quota_proxy_dynamic_config_entries") == 1


def test_topic_unreachable_at_start_then_the_proxy_catches_up():
    """The broker is down when the proxy starts: it starts at once on its YAML (the follower runs in the
    background; before, start-up waited 5 s for the topic), says so in its metrics, and follows the topic once the
    broker is up."""
    proxy_port, broker_port = free_port(), free_port()
    config = proxy_config(proxy_port, broker_port)
    config["admin_principals"] = ["User:ANONYMOUS"]  # the CLI below writes the config topic
    proxy = start_proxy(config)  # how soon: test_start_up_does_not_wait_for_an_unreachable_config_topic
    broker = None
    try:
        assert proxy.metric("kafka_quota_proxy_dynamic_config_available") == 0
        assert proxy.metric("kafka_quota_proxy_dynamic_config_entries") == 0  # YAML alone
        broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
        assert (
            configs(
                [
                    "--bootstrap-server",
                    proxy.bootstrap,
                    "--alter",
                    "--entity-type",
                    "users",
                    "--entity-default",
                    "--add-config",
                    "producer_byte_rate=777",
                ]
            )
            == 0
        )
        wait_until(
            lambda: described(proxy.bootstrap, {"user": None}) == {"producer_byte_rate": 777},
            15,
            "the users' default 777 in force",
        )
    finally:
        proxy.stop()
        if broker is not None:
            broker.stop()


@pytest.mark.measures_rate  # real time: how soon a written change is in force; beside no more than the rate groups
def test_a_change_is_in_force_within_about_a_second(cluster):
    """Five changes written with `configs`, one after another: each is in force within about a second of being
    written. The median is asserted, so one slow moment of a busy machine is not a failure."""
    proxy, _ = cluster
    took = []
    for rate in (1001, 1002, 1003, 1004, 1005):
        assert (
            configs(
                [
                    "--bootstrap-server",
                    proxy.bootstrap,
                    "--alter",
                    "--entity-type",
                    "clients",
                    "--entity-name",
                    "soon",
                    "--add-config",
                    f"producer_byte_rate={rate}",
                ]
            )
            == 0
        )
        written = time.monotonic()
        wait_until(
            lambda: described(proxy.bootstrap, {"client-id": "soon"}) == {"producer_byte_rate": rate},
            15,
            f"{rate} in force",
        )
        took.append(time.monotonic() - written)
    assert sorted(took)[len(took) // 2] < 1.5, took


@pytest.mark.measures_rate  # real time: start-up's duration; beside no more than the rate groups
def test_start_up_does_not_wait_for_an_unreachable_config_topic():
    """The broker is down: the proxy starts on its YAML at once, the follower trying in the background (before, start-up
    waited 5 s for the topic)."""
    proxy_port, broker_port = free_port(), free_port()
    started = time.monotonic()
    proxy = start_proxy(proxy_config(proxy_port, broker_port))
    try:
        took = time.monotonic() - started
        assert proxy.metric("kafka_quota_proxy_dynamic_config_available") == 0
    finally:
        proxy.stop()
    assert took < 3, took


def write_entry(bootstrap: str, entity: dict, values: dict | None) -> None:
    write_config_entry(bootstrap, entity, values, TOPIC)


def test_without_a_dynamic_config_section_the_default_topic_is_followed(cluster):
    """No ``dynamic_config`` in the YAML: an entry written to ``__kafka_quota_proxy_configs`` applies."""
    proxy, _ = cluster
    assert "dynamic_config" not in proxy_config(0, 0)
    write_entry(proxy.bootstrap, {"user": "carol"}, {"producer_byte_rate": 3000})
    wait_until(
        lambda: described(proxy.bootstrap, {"user": "carol"}) == {"producer_byte_rate": 3000},
        5,
        "carol's 3000 in force",
    )
    assert proxy.metric("kafka_quota_proxy_dynamic_config_available") == 1


def test_the_follower_reads_the_config_topic_again_after_it_is_deleted_and_recreated(cluster):
    """DeleteTopics of the config topic (a real admin client, answered 0): the entries it held no longer apply (the
    YAML alone does), and an entry written to the recreated topic applies (before: never read again)."""
    proxy, _ = cluster
    write_entry(proxy.bootstrap, {"user": "alice"}, {"producer_byte_rate": 4096})
    wait_until(
        lambda: described(proxy.bootstrap, {"user": "alice"}) == {"producer_byte_rate": 4096},
        5,
        "alice's 4096 in force",
    )
    kp_delete_topic(proxy.bootstrap, TOPIC)
    wait_until(
        lambda: described(proxy.bootstrap, {"user": "alice"}) == {}, 10, "alice unlimited once the topic is deleted"
    )
    write_entry(proxy.bootstrap, {"user": "bob"}, {"producer_byte_rate": 2048})
    wait_until(
        lambda: described(proxy.bootstrap, {"user": "bob"}) == {"producer_byte_rate": 2048}, 10, "bob's 2048 in force"
    )
    assert described(proxy.bootstrap, {"user": "alice"}) == {}
    assert proxy.metric("kafka_quota_proxy_dynamic_config_entries") == 1


def test_enabled_false_turns_the_dynamic_configuration_off():
    """``dynamic_config: {enabled: false}``: no follower; AlterClientQuotas goes to the broker (Tansu has no
    client-quota APIs), the proxy's ApiVersions does not add them, and no config-topic metric is exported."""
    from kafka import KafkaProducer

    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(proxy_port, broker_port)
    config["dynamic_config"] = {"enabled": False}
    try:
        proxy = start_proxy(config)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{proxy.metrics_port}/metrics", timeout=10) as answer:
                assert "kafka_quota_proxy_dynamic_config_" not in answer.read().decode()  # no follower
            write_entry(proxy.bootstrap, {"client-id": "dave"}, {"producer_byte_rate": 1000})
            time.sleep(1.5)  # what a follower would need to apply it: nothing must
            # dave's traffic has no quota (with the entry in force its quota_limit would be 1000:
            # test_changes_reach_live_traffic)
            producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="dave")
            try:
                producer.send("dave", b"x" * 1000).get(30)
            finally:
                producer.close(5)
            assert proxy.metric("kafka_quota_proxy_requests_total", listener="PLAINTEXT", api="Produce") >= 1
            assert proxy.scraped("kafka_quota_proxy_quota_limit") == {}
            assert proxy.metric("kafka_quota_proxy_dynamic_config_available") == 0
        finally:
            proxy.stop()
    finally:
        broker.stop()
