"""The Spark job end to end on a small generated log plus entities whose answers are known exactly.

Percentiles are exact with linear interpolation: over 101 values 0..100 (one per interval) p99 is the value at rank
0.99 x 100 = 99, so an entity producing k x 1000 bytes/s in interval k has p99 = 99,000 bytes/s exactly.
"""

import json
import os
import random

import pytest
import yaml

from analytics import job
from analytics.generate import HOG, PID_CHURNER, START_TIME, STORM_IP, TOPIC_STORM, Options, record, write_jsonl, \
    write_log

DT = 10.0
KNOWN = ("known", "exact")
KNOWN_IP = "198.51.100.7"


def known_records():
    """101 intervals of (known, exact), each one's traffic split over two connections from two IPs and listeners."""
    rng = random.Random(5)
    out = []
    ks = list(range(101))
    rng.shuffle(ks)  # the order of intervals in the file must not matter
    for i, k in enumerate(ks):
        t = START_TIME + (i + 1) * DT
        produce = k * 1000 * int(DT)   # k x 1000 bytes/s
        fetch = k * 2000 * int(DT)     # k x 2000 bytes/s
        for part, (ip, listener) in enumerate([("192.0.2.31", "PLAINTEXT"), ("192.0.2.32", "SASL")]):
            share = produce // 3 if part == 0 else produce - produce // 3
            out.append(record(t, DT, listener, ip, *KNOWN, "Produce", requests=1, request_bytes=share,
                              throttle_ms=500))  # 2 x 500 ms of 10 s: share 0.1
            out.append(record(t, DT, listener, ip, *KNOWN, "Fetch", requests=1,
                              response_bytes=fetch // 2 if part == 0 else fetch - fetch // 2))
        if i % 10 == 0:  # a new producer id in 11 intervals of 101: p99 of new PIDs/s is 0.1
            out.append(record(t, DT, "PLAINTEXT", "192.0.2.31", *KNOWN, "InitProducerId", requests=1,
                              new_producer_ids=1))
        if i == 50:  # one burst of 55 partitions
            out.append(record(t, DT, "PLAINTEXT", "192.0.2.31", *KNOWN, "CreateTopics", requests=1,
                              partition_mutations=55))
        # connections from KNOWN_IP: 1..101 in one interval each, p99 rank 99 -> 100 per 10 s
        out.append(record(t, DT, "PLAINTEXT", KNOWN_IP, None, None, None, connections_opened=k + 1))
        out.append(record(t, DT, "PLAINTEXT", "192.0.2.33", None, "no-auth", "Produce", request_bytes=1000))
    return out


@pytest.fixture(scope="module")
def result(spark, tmp_path_factory):
    log = tmp_path_factory.mktemp("usage")
    generated = write_log(str(log), Options(entities=12, intervals=60, seed=7))
    known = write_jsonl(str(log / "known.jsonl.gz"), known_records())
    (log / "ignored.txt").write_text("not a usage file\n")
    out = tmp_path_factory.mktemp("plan")
    res = job.run(str(log), str(out), spark=spark)
    res["expected_records"] = generated + known
    res["out"] = out
    return res


def quota_items(out):
    with open(out / "recommended-quotas.yaml") as f:
        return yaml.safe_load(f)["quotas"]


def item_for(items, **entity):
    entity = {k.replace("_", "-"): v for k, v in entity.items()}
    found = [it for it in items if it["entity"] == entity]
    assert len(found) == 1, (entity, found)
    return {k: v for k, v in found[0].items() if k != "entity"}


def test_reads_every_jsonl_and_rotated_gz_file(result):
    assert result["records"] == result["expected_records"]


def test_known_entity_statistics_are_exact(spark, result):
    rows = spark.read.parquet(str(result["out"] / "entity_stats")).where("user = 'known' and client_id = 'exact'")
    by_api = {r["api"]: r for r in rows.collect()}
    produce = by_api["Produce"]
    assert produce["intervals"] == 101
    assert (produce["request_rate_p50"], produce["request_rate_p95"], produce["request_rate_p99"],
            produce["request_rate_max"]) == (50_000, 95_000, 99_000, 100_000)
    assert produce["throttle_share"] == pytest.approx(0.1)
    assert by_api["Fetch"]["response_rate_p99"] == 198_000
    total = by_api["*"]
    assert total["mutations_max_interval"] == 55 and total["mutation_rate_max"] == 5.5
    assert total["mutation_rate_p99"] == 0
    ips = {r["ip"]: r for r in spark.read.parquet(str(result["out"] / "ip_stats")).collect()}
    assert (ips[KNOWN_IP]["connection_rate_p50"], ips[KNOWN_IP]["connection_rate_p99"],
            ips[KNOWN_IP]["connection_rate_max"]) == (5.1, 10.0, 10.1)


def test_recommended_quotas(result):
    items = quota_items(result["out"])
    # 99,000 B/s x 1.5 = 148,500 -> 150,000; 198,000 x 1.5 = 297,000 -> 300,000; burst 55 / (11 x 1 s) = 5.0
    assert item_for(items, user="known", client_id="exact") == {
        "producer_byte_rate": 150_000, "consumer_byte_rate": 300_000, "controller_mutation_rate": 5.0}
    # 0.1 new PIDs/s x 3600 s x 1.5, on the user alone (KIP-936)
    assert item_for(items, user="known") == {"producer_ids_rate": 540.0}
    assert item_for(items, ip=KNOWN_IP) == {"connection_creation_rate": 15.0}
    assert item_for(items, client_id="no-auth") == {"producer_byte_rate": 150}
    assert all(isinstance(it.get("producer_byte_rate", 0), int) for it in items)
    assert not any("producer_ids_rate" in it and "client-id" in it["entity"] for it in items)
    commands = (result["out"] / "recommended-commands.txt").read_text().splitlines()
    assert len(commands) == len(items)
    assert ("kafka-quota-proxy configs --bootstrap-server HOST:PORT --alter --entity-type users --entity-name known --entity-type clients "
            "--entity-name exact --add-config producer_byte_rate=150000,consumer_byte_rate=300000,"
            "controller_mutation_rate=5.0") in commands
    assert (f"kafka-quota-proxy configs --bootstrap-server HOST:PORT --alter --entity-type ips --entity-name {KNOWN_IP} "
            "--add-config connection_creation_rate=15.0") in commands


def test_misbehaving_tenants_top_their_dimension(result):
    with open(result["out"] / "top_offenders.json") as f:
        top = {name: dim["top"][0] for name, dim in json.load(f).items()}
    assert top["new_producer_ids"]["user"] == PID_CHURNER[0]
    assert top["connection_rate"]["ip"] == STORM_IP
    assert (top["producer_byte_rate"]["user"], top["producer_byte_rate"]["client_id"]) == HOG
    assert (top["throttle_share"]["user"], top["throttle_share"]["client_id"]) == HOG
    assert (top["partition_mutations"]["user"], top["partition_mutations"]["client_id"]) == TOPIC_STORM


def test_report_links_its_charts(result):
    html = (result["out"] / "report.html").read_text()
    charts = sorted(p.name for p in result["out"].glob("chart-*.svg"))
    assert len(charts) == 5
    for name in charts:
        assert f"src='{name}'" in html and os.path.getsize(result["out"] / name) > 1000
    assert "203.0.113.66" in html and "recommended-quotas.yaml" in html


def test_kafka_quota_proxy_analyze(spark, result, tmp_path):
    """The proxy's CLI runs the same job (here on the tests' session, which it leaves running)."""
    from proxy.cli.main import main

    log = tmp_path / "usage"
    write_log(str(log), Options(entities=3, intervals=10, seed=1))
    assert main(["analyze", "--input", str(log), "--output", str(tmp_path / "out"), "--headroom", "2",
                 "--no-charts"]) == 0
    text = (tmp_path / "out" / "recommended-quotas.yaml").read_text()
    assert "headroom 2" in text and yaml.safe_load(text)["quotas"]
    assert spark.range(1).count() == 1


def test_analyze_a_missing_input_says_so(spark, tmp_path, capsys):
    from analytics.cli import main

    assert main(["analyze", "--input", str(tmp_path / "nothing"), "--output", str(tmp_path / "out")]) == 1
    assert "kafka-quota-proxy analyze:" in capsys.readouterr().err


def test_an_empty_log_gives_an_empty_plan(spark, tmp_path):
    (tmp_path / "usage").mkdir()
    res = job.run(str(tmp_path / "usage"), str(tmp_path / "out"), spark=spark)
    assert res["records"] == 0 and res["quotas"] == []
    assert quota_items(tmp_path / "out") == []
    assert not list((tmp_path / "out").glob("chart-*.svg"))
    assert "None in this log." in (tmp_path / "out" / "report.html").read_text()


def test_the_recommended_quotas_are_a_block_the_proxy_accepts_as_it_is(result):
    """`recommended-quotas.yaml` pasted into a configuration: the proxy's loader takes every item, ip entities
    included, and resolves them as recommended."""
    from config.loader import load_config_text

    base = "upstream: {bootstrap_servers: ['127.0.0.1:9092']}\nlisteners: [{name: L, bind: '127.0.0.1:0'}]\n"
    config = load_config_text(base + (result["out"] / "recommended-quotas.yaml").read_text())
    assert config.quotas.limit("producer_byte_rate", "known", "exact") == 150_000
    assert config.connections.ip_rate(KNOWN_IP) == 15.0
