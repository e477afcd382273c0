"""The Spark job end to end on a small generated log plus entities whose answers are known exactly.

Percentiles are exact with linear interpolation: over 101 values 0..100 (one per interval) p99 is the value at rank
0.99 x 100 = 99, so an entity producing k x 1000 bytes/s in interval k has p99 = 99,000 bytes/s exactly.

One tenant (:data:`SPLIT`) produces through two sidecars (two brokers) whose intervals do not line up: under
quota.scope broker its figure is the busiest broker's, under cluster the sum (see :func:`split_records`).
"""

import json
import os
import random
import re
from html import escape

import pytest
import yaml

pytest.importorskip("pyspark", reason="the analytics extra (pip install kafka-quota-proxy[analytics]) is not installed")

from pyspark.sql import functions as F  # noqa: E402

from analytics import demand, job, offenders, report  # noqa: E402
from analytics.generate import (  # noqa: E402
    HOG,
    LEGITIMATE,
    PID_CHURNER,
    START_TIME,
    STORM_IP,
    THROTTLED,
    TOPIC_STORM,
    Options,
    record,
    write_jsonl,
    write_log,
)
from quota.primitives.entity import DEFAULT  # noqa: E402

# The module's one Spark job (the fixture below) runs the planner with its replay on 12 entities x 60 intervals:
# about 40 s on an idle 2-core machine, 130 s at load 20; the suite's 120 s per test would cut it on a busy one.
pytestmark = [pytest.mark.timeout(600), pytest.mark.long_running(seconds=60)]

DT = 10.0
KNOWN = ("known", "exact")
KNOWN_IP = "198.51.100.7"
SPLIT = ("split", "two-brokers")
BACKUP = {"user": LEGITIMATE[0], "client-id": LEGITIMATE[1]}  # the fixture's run flags it --legitimate


def split_records(scope="broker"):
    """20 intervals: sidecar-1 takes k x 1000 bytes/s of SPLIT's produce in interval k (1..20), sidecar-2 (its
    intervals ending 3.7 s later and 4 ms longer, as a proxy started at another time writes them) the rest of 21,000
    bytes/s. The busiest broker's rate is max(k, 21 - k) x 1000: 11..20 thousand twice each, p99 (rank 18.81 of 19)
    20,000; the cluster's is 21,000 in every interval."""
    out = []
    for k in range(1, 21):
        t = START_TIME + k * DT
        out.append(
            record(
                t,
                DT,
                "PLAINTEXT",
                "192.0.2.41",
                *SPLIT,
                "Produce",
                requests=1,
                request_bytes=k * 1000 * int(DT),
                proxy="sidecar-1",
                scope=scope,
            )
        )
        out.append(
            record(
                t + 3.7,
                DT + 0.004,
                "PLAINTEXT",
                "192.0.2.41",
                *SPLIT,
                "Produce",
                requests=1,
                request_bytes=(21 - k) * 10_004,
                proxy="sidecar-2",
                scope=scope,
            )
        )
    return out


STUCK = ("stuck", "held-through")


def stuck_records():
    """10 intervals of STUCK held 9.6 s of each 10 s to 50,000 B/s, every request throttled: no interval tells its
    demand, its held share is 0.96."""
    return [
        record(START_TIME + k * DT, DT, "PLAINTEXT", "192.0.2.51", *STUCK, "Produce", requests=10, throttles=10)
        | {"request_bytes": 500_000, "throttle_ms": 9600, "held_ms": 9600, "quota_rate": 50_000, "scope": "cluster"}
        for k in range(1, 11)
    ]


def known_records():
    """101 intervals of (known, exact), each one's traffic split over two connections from two IPs and listeners."""
    rng = random.Random(5)
    out = []
    ks = list(range(101))
    rng.shuffle(ks)  # the order of intervals in the file must not matter
    for i, k in enumerate(ks):
        t = START_TIME + (i + 1) * DT
        produce = k * 1000 * int(DT)  # k x 1000 bytes/s
        fetch = k * 2000 * int(DT)  # k x 2000 bytes/s
        for part, (ip, listener) in enumerate([("192.0.2.31", "PLAINTEXT"), ("192.0.2.32", "SASL")]):
            share = produce // 3 if part == 0 else produce - produce // 3
            out.append(
                record(t, DT, listener, ip, *KNOWN, "Produce", requests=1, request_bytes=share, throttle_ms=500)
            )  # 2 x 500 ms of 10 s: share 0.1
            out.append(
                record(
                    t,
                    DT,
                    listener,
                    ip,
                    *KNOWN,
                    "Fetch",
                    requests=1,
                    response_bytes=fetch // 2 if part == 0 else fetch - fetch // 2,
                )
            )
        if i % 10 == 0:  # a new producer id in 11 intervals of 101: p99 of new PIDs/s is 0.1
            out.append(
                record(t, DT, "PLAINTEXT", "192.0.2.31", *KNOWN, "InitProducerId", requests=1, new_producer_ids=1)
            )
        if i == 50:  # one burst of 55 partitions
            out.append(
                record(t, DT, "PLAINTEXT", "192.0.2.31", *KNOWN, "CreateTopics", requests=1, partition_mutations=55)
            )
        # connections from KNOWN_IP: 1..101 in one interval each, p99 rank 99 -> 100 per 10 s
        out.append(record(t, DT, "PLAINTEXT", KNOWN_IP, None, None, None, connections_opened=k + 1))
        out.append(record(t, DT, "PLAINTEXT", "192.0.2.33", None, "no-auth", "Produce", request_bytes=1000))
    return out


STORM = ("storm", "rebalancer")
POLLER = ("poller", "md")  # 12 Metadata requests an interval, every other interval held 5 s by its request_rate
FIREHOSE = "firehose"
STEADY_TOPICS = {"t1": 40_000, "t2": 60_000, "t3": 80_000, "t4": 100_000}  # B/s each


def named_records():
    """101 intervals (at the known tenant's times) of what the proxy logs for topic quotas and request rates:
    known/exact writes topic ``orders`` at k x 1000 B/s in interval k (0..100; p99 99,000) and reads it at half
    that, the four steady topics at their rates and ``firehose`` at 10 MB/s (an offender among the topics), every
    other topic together under ``<default>``, its partition 3 (an entry of its own) at k x 200 B/s and its other
    partitions under ``partition: <default>`` together; STORM sends k JoinGroup requests in interval k (p99 9.9/s, 15 x its
    fleet's figure, which sends a Metadata request now and then: far above it, within 4 MADs); the group ``payments``
    5 requests an interval, every other group 300 together."""
    out = []
    for i in range(101):
        t, k = START_TIME + (i + 1) * DT, i
        written = {"orders": k * 1000 * int(DT), FIREHOSE: 10_000_000 * int(DT), "<default>": 7_000_000}
        written.update({topic: rate * int(DT) for topic, rate in STEADY_TOPICS.items()})
        partitions = {"orders/3": k * 200 * int(DT), "orders/<default>": k * 800 * int(DT)}
        out.append(
            record(t, DT, "PLAINTEXT", "192.0.2.31", *KNOWN, "Produce", topic_bytes=written, partition_bytes=partitions)
        )
        out.append(record(t, DT, "PLAINTEXT", "192.0.2.31", *KNOWN, "Fetch", topic_bytes={"orders": k * 500 * int(DT)}))
        out.append(record(t, DT, "PLAINTEXT", "192.0.2.61", *STORM, "JoinGroup", requests=k))
        groups = {"payments": 5, "<default>": 300}
        out.append(record(t, DT, "PLAINTEXT", "192.0.2.61", *STORM, "SyncGroup", requests=0, group_requests=groups))
        held = {"held_by": {"request_rate": 3}, "throttle_ms": 5_000} if i % 2 else {}
        out.append(record(t, DT, "PLAINTEXT", "192.0.2.62", *POLLER, "Metadata", requests=12, **held))
    return out


GROUP, MEMBERS = "etl-team", (("grp-a", "etl"), ("grp-b", "etl"))


def group_records():
    """60 intervals of a quota group's two members (users grp-a and grp-b, the group's users): 300,000 and
    100,000 B/s of Produce, 400,000 B/s together, which neither shows alone; in intervals 20-29 the group's quota
    (250,000 B/s) holds grp-b 6 s of each, 2 of its 10 requests: 50,000 B/s sent, at its pace while free 100,000.
    The group's other keys (:func:`group_key_records`)."""
    out = group_key_records()
    for i in range(60):
        for (user, client_id), rate in zip(MEMBERS, (300_000, 100_000)):
            held = {"throttles": 2, "throttle_ms": 6_000, "quota_rate": 250_000.0} if user == "grp-b" else {}
            sent = rate * int(DT) // 2 if held and 20 <= i < 30 else rate * int(DT)
            out.append(
                record(
                    START_TIME + (i + 1) * DT,
                    DT,
                    "PLAINTEXT",
                    "192.0.2.41",
                    user,
                    client_id,
                    "Produce",
                    quota_group=GROUP,
                    requests=10,
                    request_bytes=sent,
                    **(held if 20 <= i < 30 else {}),
                )
            )
    return out


def group_key_records():
    """The group's other keys: grp-a creates 22 partitions and grp-b 33 in interval 5 (55 in one interval: each
    alone would need a bucket of 22 or 33); each starts a new producer in interval 10; grp-a sends 3 Metadata
    requests an interval and grp-b 2, and in intervals 40-49 grp-b's are held 8 s by the group's request_rate, 1 of
    its 2 held: 0.2 requests/s let through, 0.5 at its pace while free (the group: 0.8, let through 0.5)."""
    out = []
    for i in range(60):
        t = START_TIME + (i + 1) * DT
        for (user, client_id), created, asked in zip(MEMBERS, (22, 33), (3, 2)):
            member = (t, DT, "PLAINTEXT", "192.0.2.41", user, client_id)
            if i == 5:
                out.append(record(*member, "CreateTopics", quota_group=GROUP, requests=1, partition_mutations=created))
            if i == 10:
                out.append(record(*member, "InitProducerId", quota_group=GROUP, requests=1, new_producer_ids=1))
            held = {"held_by": {"request_rate": 1}, "throttle_ms": 8_000} if user == "grp-b" and 40 <= i < 50 else {}
            out.append(record(*member, "Metadata", quota_group=GROUP, requests=asked, **held))
    return out


@pytest.fixture(scope="module")
def result(spark, tmp_path_factory):
    log = tmp_path_factory.mktemp("usage")
    generated = write_log(str(log), Options(entities=12, intervals=60, seed=7))
    known = write_jsonl(str(log / "known.jsonl.gz"), known_records())
    known += write_jsonl(str(log / "named.jsonl"), named_records())
    known += write_jsonl(str(log / "groups.jsonl"), group_records())
    (log / "ignored.txt").write_text("not a usage file\n")
    out = tmp_path_factory.mktemp("plan")
    res = job.run(str(log), str(out), spark=spark, replay="recommended", legitimate=[BACKUP], fleet_default=None)
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


def own_figures(result, **entity):
    """An entity's own recommendations: its table entry, with its own figure where it is an outlier (whose entry
    holds its fleet's figure instead)."""
    values = item_for(quota_items(result["out"]), **entity)
    entity = {k.replace("_", "-"): v for k, v in entity.items()}
    return {**values, **{o.key: o.figure for o in result["outliers"] if o.entity == entity}}


def test_reads_every_jsonl_and_rotated_gz_file(result):
    assert result["records"] == result["expected_records"]


def test_known_entity_statistics_are_exact(spark, result):
    rows = spark.read.parquet(str(result["out"] / "entity_stats")).where("user = 'known' and client_id = 'exact'")
    by_api = {r["api"]: r for r in rows.collect()}
    produce = by_api["Produce"]
    assert produce["intervals"] == 101
    assert (
        produce["request_rate_p50"],
        produce["request_rate_p95"],
        produce["request_rate_p99"],
        produce["request_rate_max"],
    ) == (50_000, 95_000, 99_000, 100_000)
    # held 2 x 500 ms of each 10 s (a log without held_ms: each record's throttle_ms, capped at the interval)
    assert produce["held_share"] == pytest.approx(0.1) and produce["throttle_seconds"] == pytest.approx(101)
    assert by_api["Fetch"]["response_rate_p99"] == 198_000
    total = by_api["*"]
    assert total["mutations_max_interval"] == 55 and total["mutation_rate_max"] == 5.5
    assert total["mutation_rate_p99"] == 0
    ips = {r["ip"]: r for r in spark.read.parquet(str(result["out"] / "ip_stats")).collect()}
    assert (
        ips[KNOWN_IP]["connection_rate_p50"],
        ips[KNOWN_IP]["connection_rate_p99"],
        ips[KNOWN_IP]["connection_rate_max"],
    ) == (5.1, 10.0, 10.1)


def test_recommended_quotas(result):
    items = quota_items(result["out"])
    # 99,000 B/s x 1.5 = 148,500 -> 150,000; 198,000 x 1.5 = 297,000 -> 300,000; burst 55 / (11 x 1 s) = 5.0 (its
    # own figures: a burst of 55 partitions in a fleet that mutates none is an offender's, held to the fleet's)
    assert own_figures(result, user="known", client_id="exact") == {
        "producer_byte_rate": 150_000,
        "consumer_byte_rate": 300_000,
        "controller_mutation_rate": 5.0,
    }
    # 0.1 new PIDs/s x 3600 s x 1.5, on the user alone (KIP-936)
    assert own_figures(result, user="known") == {"producer_ids_rate": 540.0}
    assert own_figures(result, ip=KNOWN_IP) == {"connection_creation_rate": 15.0}
    assert item_for(items, client_id="no-auth") == {"producer_byte_rate": 150}
    assert all(isinstance(it.get("producer_byte_rate", 0), int) for it in items)
    assert not any("producer_ids_rate" in it and "client-id" in it["entity"] for it in items)
    commands = [
        line
        for line in (result["out"] / "recommended-commands.txt").read_text().splitlines()
        if not line.startswith("#")
    ]
    assert len(commands) == len([it for it in items if "quota-group" not in it["entity"]])  # a group: file only
    known = item_for(items, user="known", client_id="exact")
    assert (
        "kafka-quota-proxy configs --bootstrap-server HOST:PORT --alter --entity-type users --entity-name known "
        "--entity-type clients --entity-name exact --add-config " + ",".join(f"{k}={v}" for k, v in known.items())
    ) in commands
    assert (
        f"kafka-quota-proxy configs --bootstrap-server HOST:PORT --alter --entity-type ips --entity-name {KNOWN_IP} "
        f"--add-config connection_creation_rate={item_for(items, ip=KNOWN_IP)['connection_creation_rate']}"
    ) in commands


def test_every_output_says_the_scope_its_figures_are_for(result):
    """The log records quota.scope broker (one proxy, no broker ids): every output says its figures are per broker,
    and that Kafka applies them on each broker."""
    assert result["scope"] == "broker" and result["proxies"] == 1 and result["broker budgets"] == 1
    per_broker = "quota.scope broker: each rate is per broker, the busiest broker's in each interval"
    each = "Kafka applies producer_byte_rate, consumer_byte_rate and producer_ids_rate on each broker"
    yaml_text = " ".join(
        line.lstrip("# ") for line in (result["out"] / "recommended-quotas.yaml").read_text().splitlines()
    )
    assert per_broker in yaml_text and each in yaml_text
    assert (result["out"] / "recommended-commands.txt").read_text().startswith(f"# {per_broker}")
    html = (result["out"] / "report.html").read_text()
    assert f"<strong>{escape(per_broker)}" in html and "for quota.scope broker)</h2>" in html
    assert "<td>quota scope</td><td>broker</td>" in html
    assert (
        "Produce bytes per second, busiest broker: top 5"
        in (result["out"] / "chart-producer_byte_rate.svg").read_text()
    )
    assert per_broker in "\n".join(report.summary_lines(result))


def test_the_split_tenant_summed_per_interval_under_cluster_scope(spark):
    """The frames the job builds, on SPLIT's records alone: the two sidecars' misaligned intervals land on one grid
    (10 s, the records' midpoints), so the cluster's rate is 21,000 B/s in each of 20 intervals, and the busiest
    broker's 11,000..20,000 twice each. (The job on a log of several proxies: test_kafka_quota_proxy_analyze.)"""

    from analytics import recommend, stats

    usage = spark.createDataFrame(split_records("cluster"), stats.SCHEMA)
    grid = stats.on_grid(usage)
    # 20,000 x 1.5 = 30,000 per broker; 21,000 x 1.5 = 31,500 -> 32,000 for the cluster
    for scope, p99, recommended in (("cluster", 21_000, 32_000), ("broker", 20_000, 30_000)):
        [row] = stats.entity_stats(stats.entity_intervals(grid, scope)).where("api = 'Produce'").collect()
        assert row["intervals"] == 20 and row["request_rate_p99"] == pytest.approx(p99), scope
        assert row["request_bytes"] == sum(r["request_bytes"] for r in split_records())
        [item] = recommend.build_quotas([row.asDict()], [], [])
        assert item == {"entity": {"user": SPLIT[0], "client-id": SPLIT[1]}, "producer_byte_rate": recommended}
    # the same traffic through one cluster-mode proxy's broker ports 1 and 2: per broker, the same figure
    ports = spark.createDataFrame(
        [{**r, "proxy": "cm:9092", "broker": int(r["proxy"][-1])} for r in split_records()], stats.SCHEMA
    )
    [row] = (
        stats.entity_stats(stats.entity_intervals(stats.on_grid(ports), "broker", ports=True))
        .where("api = 'Produce'")
        .collect()
    )
    assert row["request_rate_p99"] == pytest.approx(20_000)


def test_misbehaving_tenants_top_their_dimension(result):
    with open(result["out"] / "top_offenders.json") as f:
        top = {name: dim["top"][0] for name, dim in json.load(f).items()}
    assert top["new_producer_ids"]["user"] == PID_CHURNER[0]
    assert top["connection_rate"]["ip"] == STORM_IP
    assert (top["producer_byte_rate"]["user"], top["producer_byte_rate"]["client_id"]) == HOG
    assert (top["held_share"]["user"], top["held_share"]["client_id"]) == ("steady", "over-quota")  # held ~98 %
    assert (top["partition_mutations"]["user"], top["partition_mutations"]["client_id"]) == TOPIC_STORM


def spark_top(table, api, metric, n):
    """What the job once asked Spark for each dimension: its reference for the ranking it now does on collected rows."""
    if api is not None:
        table = table.where(F.col("api") == api)
    return [r.asDict() for r in table.where(F.col(metric) > 0).orderBy(F.col(metric).desc(), *table.columns[:2])
            .limit(n).collect()]  # fmt: skip


def test_the_dimensions_are_ranked_on_collected_rows_as_spark_orders_them(spark, result):
    """Every dimension's top tenants in top_offenders.json, in order, are the ones Spark's ``orderBy`` gives on the
    written tables; and every dimension of the entity table is of an API the job collects."""
    from analytics import dimensions, stats

    with open(result["out"] / "top_offenders.json") as f:
        said = json.load(f)
    tables = {name: spark.read.parquet(str(result["out"] / f"{name}_stats")) for name in ("entity", "user", "ip")}
    for name, (_, table, api, metric, _, cols) in dimensions.DIMENSIONS.items():
        assert table != "entity" or api in ("Produce", "Fetch", stats.ALL_APIS), name
        expected = spark_top(tables[table], api, metric, job.TOP_N)
        keys = job.KEYS[table]
        assert said[name]["top"] == [
            {**{k: r[k] for k in keys}, "value": r[metric], **{c: r[c] for c in cols}} for r in expected
        ], name
        assert said[name]["top"], name  # the fixture's log has offenders in every dimension


def test_top_rows_orders_ties_nulls_and_nan_as_spark_does(spark):
    """Equal figures (ties by the first two columns, a null first), a figure of 0, below 0, null and NaN (Spark: above
    every number), for one API and for all: the same rows in the same order as Spark's ``where``/``orderBy``/``limit``."""
    nan = float("nan")
    figures = [5.0, 5.0, 5.0, 5.0, 0.0, -1.0, None, nan, 7.5, 2.0, 5.0, nan]
    users = ["b", "a", None, "a", "c", "d", "e", "f", "g", "h", "a", None]
    clients = ["x", "y", "z", None, "x", "x", "x", "x", "x", "x", "x", "q"]
    apis = ["Produce", "Produce", "Produce", "Fetch", "Produce", "Produce", "Produce", "Fetch", "Fetch", "Produce",
            "Produce", "Produce"]  # fmt: skip
    rows = [{"user": u, "client_id": c, "api": a, "rate": r} for u, c, a, r in zip(users, clients, apis, figures)]
    table = spark.createDataFrame(rows, "user string, client_id string, api string, rate double")
    collected = [r.asDict() for r in table.collect()]
    for api in ("Produce", "Fetch", None):
        for n in (1, 3, 20):
            expected = spark_top(table, api, "rate", n)
            got = offenders.top_rows(collected, api, "rate", n, table.columns[:2])
            assert repr(got) == repr(expected), (api, n)  # repr: NaN equal to NaN


def test_the_four_offenders_are_named_and_held_and_the_legitimate_one_keeps_its_own(spark, result):
    """Issue 48, on the generator's fleet: the hog, the connection storm, the producer-id churner and the topic
    creator are each named an offender of its fleet, with the evidence on its entry, and held to the fleet's figure,
    far below its own; the backup connector, as far above its fleet, keeps its own figure because the run flags it
    --legitimate, and the same statistics without the flag name it an offender too."""
    from analytics import fleet, stats
    from analytics.outliers import entity_flag

    found = {(entity_flag(o.entity), o.key): o for o in result["outliers"]}
    items = quota_items(result["out"])
    text = (result["out"] / "recommended-quotas.yaml").read_text()
    commands = (result["out"] / "recommended-commands.txt").read_text()
    said = "\n".join(report.summary_lines(result))
    html_text = (result["out"] / "report.html").read_text()
    for entity, key in (
        ({"user": HOG[0], "client-id": HOG[1]}, "producer_byte_rate"),
        ({"ip": STORM_IP}, "connection_creation_rate"),
        ({"user": PID_CHURNER[0]}, "producer_ids_rate"),
        ({"user": TOPIC_STORM[0], "client-id": TOPIC_STORM[1]}, "controller_mutation_rate"),
    ):
        o = found[(entity_flag(entity), key)]
        assert not o.legitimate and o.mads > o.fence and o.limit * 10 < o.figure, o
        assert next(it for it in items if it["entity"] == entity)[key] == o.limit
        entry = text[
            text.index(f"  - entity: {yaml.safe_dump(entity, default_flow_style=True, sort_keys=False).strip()}") :
        ]
        assert f"    # offender: {o.evidence()[:40]}" in entry.split("\n  - ")[0]
        assert f"# {key}: offender: " in commands and f"offender {entity_flag(entity)} {key}: " in said
        assert escape(entity_flag(entity)) in html_text
    backup = found[(entity_flag(BACKUP), "consumer_byte_rate")]
    assert backup.legitimate and backup.mads > backup.fence and backup.figure >= 1.5 * 38_000_000
    assert next(it for it in items if it["entity"] == BACKUP)["consumer_byte_rate"] == backup.figure
    assert f"outlier {entity_flag(BACKUP)} consumer_byte_rate: " in said and "kept at its own: --legitimate" in said
    tables = {name: spark.read.parquet(str(result["out"] / f"{name}_stats")) for name in ("entity", "user", "ip")}
    entity_rows = [r.asDict() for r in tables["entity"].where(F.col("api").isin("Produce", "Fetch", stats.ALL_APIS))
                   .collect()]  # fmt: skip
    unflagged = fleet.plan(entity_rows, *([r.asDict() for r in tables[n].collect()] for n in ("user", "ip")))
    [named] = [o for o in unflagged.outliers if o.entity == BACKUP]
    assert not named.legitimate and named.recommended < backup.figure / 10


def test_report_links_its_charts(result):
    html = (result["out"] / "report.html").read_text()
    charts = sorted(p.name for p in result["out"].glob("chart-*.svg"))
    assert len(charts) == 5
    for name in charts:
        assert f"src='{name}'" in html and os.path.getsize(result["out"] / name) > 1000
    assert "203.0.113.66" in html and "recommended-quotas.yaml" in html


PROXY_CONFIG = """\
upstream: {bootstrap_servers: ["127.0.0.1:9093"]}
listeners:
  - name: SSL
    bind: "0.0.0.0:19093"
    tls: {certfile: /nowhere/server.pem, keyfile: /nowhere/server.key}   # not on the planner's host
settings:
  controller.quota.window.size.seconds: 5
  producer.id.quota.window.size.seconds: 60
  listener.name.SSL.max.connections: 100
quotas:
  - entity: {user: split, client-id: two-brokers}   # the split tenant: under the fleet default, so removed
    producer_byte_rate: 30000
  - entity: {user: ghost, client-id: gone}          # not in the log: kept as it is
    producer_byte_rate: 5000
  - entity: {topic: orders}                         # a topic quota: not the planner's
    produce_byte_rate: 1000000
"""


@pytest.fixture
def proxy_in_force():
    """A proxy in front of Tansu (which answers no DescribeClientQuotas: the proxy does) whose YAML holds
    PROXY_CONFIG's user and client-id quotas, and STUCK's producer_byte_rate 50,000 written through its config topic
    (AlterClientQuotas): the table in force ``analyze --bootstrap`` reads."""
    from tests.harness import wait_until
    from tests.integration.quota_apis import alter, described, op, send, start

    quotas = [it for it in yaml.safe_load(PROXY_CONFIG)["quotas"] if "topic" not in it["entity"]]
    proxy, broker = start(["User:ANONYMOUS"], quotas=quotas)
    try:
        stuck = [
            {"entity_type": "user", "entity_name": STUCK[0]},
            {"entity_type": "client-id", "entity_name": STUCK[1]},
        ]
        written = send(proxy.bootstrap, alter([{"entity": stuck, "ops": [op("producer_byte_rate", 50_000)]}]))
        assert [e.error_code for e in written.entries] == [0]
        entity = {"user": STUCK[0], "client-id": STUCK[1]}
        wait_until(lambda: described(proxy.bootstrap, entity) == {"producer_byte_rate": 50_000}, 15, "stuck's quota")
        yield proxy
    finally:
        proxy.stop()
        broker.stop()


def test_kafka_quota_proxy_analyze(spark, result, tmp_path, capsys, proxy_in_force):
    """The proxy's CLI runs the same job (here on the tests' session, which it leaves running): the windows read from
    the proxy's configuration (only its settings: checked: the TLS files it names are on the proxy's host), a flag
    overriding one of them, and the steps said on standard error as they start. The table in force is what a running
    proxy answers (--bootstrap), its keys with the file's value read as the file's: the commands file is the change
    set against it, with the replay's held time beside each line."""
    from proxy.cli.main import main

    log = tmp_path / "usage"
    write_log(str(log), Options(entities=3, intervals=10, seed=1, scope="cluster"))
    write_jsonl(str(log / "split.jsonl"), split_records("cluster"))  # three proxies' logs, quota.scope cluster
    write_jsonl(str(log / "stuck.jsonl"), stuck_records())  # a tenant held 96% of the log
    (tmp_path / "proxy.yaml").write_text(PROXY_CONFIG)
    argv = ["analyze", "--input", str(log), "--output", str(tmp_path / "out"), "--headroom", "2", "--no-charts"]
    argv += ["--capacity", "bytes_in=1000,connections=1e6", "--bootstrap", proxy_in_force.bootstrap]
    assert main([*argv, "--proxy-config", str(tmp_path / "proxy.yaml"), "--producer-id-window-s", "120"]) == 0
    text = (tmp_path / "out" / "recommended-quotas.yaml").read_text()
    assert "headroom 2" in text and yaml.safe_load(text)["quotas"]
    # controller window from the file (5 s), producer ids from the flag (120 s, not the file's 60), the rest defaults
    assert "(controller window 11 x 5 s; producer ids per 120 s, 11 windows)" in " ".join(text.splitlines())
    assert "holds 11 samples of 5 s of the rate" in " ".join(line.lstrip("# ") for line in text.splitlines())
    # SPLIT's two sidecars summed: 21,000 B/s (x 2 = 42,000), below the fleet default (by default, the table is the
    # defaults and the tenants above them), which it resolves to; the outputs say the figures are the cluster's
    from config.quotas import parse_quota_section

    [split] = (
        spark.read.parquet(str(tmp_path / "out" / "entity_stats"))
        .where(f"user = '{SPLIT[0]}' and api = 'Produce'")
        .collect()
    )
    assert split["request_rate_p99"] == pytest.approx(21_000)
    items = yaml.safe_load(text)["quotas"]
    default = item_for(items, user="<default>", client_id="<default>")["producer_byte_rate"]
    assert default > 42_000 and not [it for it in items if it["entity"] == {"user": SPLIT[0], "client-id": SPLIT[1]}]
    assert parse_quota_section(items, "quotas")[0].resolve("producer_byte_rate", *SPLIT).limit == default
    assert "fleet defaults: a <default> entry per entity type and key at p90" in " ".join(text.splitlines())
    report_text = (tmp_path / "out" / "report.html").read_text()
    assert f"<td>user={SPLIT[0]} client-id={SPLIT[1]}</td><td>producer_byte_rate</td><td>42,000</td>" in report_text
    cluster = "quota.scope cluster: each rate is the tenant's total over the whole cluster, summed per interval over 3"
    assert cluster in " ".join(line.lstrip("# ") for line in text.splitlines())
    assert "for quota.scope cluster)</h2>" in (tmp_path / "out" / "report.html").read_text()
    out, err = capsys.readouterr()
    assert cluster in out
    config = str(tmp_path / "proxy.yaml")
    assert f"controller.quota.window.size.seconds</td><td>5 (--proxy-config {config})" in report_text
    assert "producer.id.quota.window.size.seconds</td><td>120 (--producer-id-window-s)" in report_text
    assert "quota.window.num</td><td>11 (the proxy&#x27;s default)" in report_text
    source = f"DescribeClientQuotas through {proxy_in_force.bootstrap} (keys also in {config} read as set there)"
    assert f"change set against {source}: " in out
    commands = (tmp_path / "out" / "recommended-commands.txt").read_text()
    said_text = " ".join(line[2:] for line in commands.splitlines() if line.startswith("# "))
    removed = f"remove user={SPLIT[0]} client-id={SPLIT[1]} producer_byte_rate 30,000 -> the fleet default: held "
    assert re.search(
        re.escape(removed) + r"[\d,.]+ s today, [\d,.]+ s after the change \(1 tenant in the log\)", said_text
    )
    assert f"edit {config}: remove producer_byte_rate from the entry of user={SPLIT[0]}" in said_text
    # STUCK's 50,000, which only the proxy's answer holds (set through its config topic): left to the fleet default
    # like SPLIT's, but deleted from the config topic by configs, where SPLIT's is an edit of the file
    assert f"remove user={STUCK[0]} client-id={STUCK[1]} producer_byte_rate 50,000 -> the fleet default" in said_text
    [deleted] = [line for line in commands.splitlines() if f"--entity-name {STUCK[0]} " in line]
    assert deleted.endswith("--delete-config producer_byte_rate") and "--add-config" not in deleted
    # the lines governing a tenant held 90% of the log or more say its after-figure is a lower bound; no other
    produce = spark.read.parquet(str(tmp_path / "out" / "entity_stats")).where("api = 'Produce'").collect()
    named = {
        r["client_id"]: (f"user={r['user']} " if r["user"] else "") + f"client-id={r['client_id']}" for r in produce
    }
    mostly = {f"{named[r['client_id']]} held {r['held_share']:.0%}" for r in produce if r["held_share"] >= 0.9}
    said_mostly = re.findall(r"((?:user=\S+ )?client-id=\S+ held \d+%) of the log: its demand is at least", said_text)
    assert set(said_mostly) == mostly == {f"user={STUCK[0]} client-id={STUCK[1]} held 96%"}
    replay_part = report_text.split("<h2>Replay under")[1]  # and the replay's table, on the tenant's own row
    assert "<td>held 96% of the log: its demand is at least 50,000 B/s, how much more the log" in replay_part
    # one configs --alter per entity with an add, raise or lower or a removal from the config topic; a comment line
    # per change; no line for ghost
    keys = "producer_byte_rate|consumer_byte_rate|controller_mutation_rate|producer_ids_rate|connection_creation_rate"
    said = re.findall(rf"^# (add|raise|lower|remove) (.*?) (?:{keys}) ", commands, re.M)
    counts = re.search(r"change set against .*?: (\d+) add, (\d+) raise, (\d+) lower, (\d+) remove", out)
    assert len(said) == sum(map(int, counts.groups())) > 1
    altered = [line for line in commands.splitlines() if not line.startswith("#")]
    configs_done = {entity for action, entity in said if action != "remove"} | {f"user={STUCK[0]} client-id={STUCK[1]}"}
    assert len(altered) == len(configs_done) and "ghost" not in commands  # STUCK's: its --delete-config
    assert "Kept as they are (1)" in report_text and "<td>user=ghost client-id=gone</td>" in report_text
    # the capacity: what the table commits in the busiest interval, by the tenants active in it, never above the sum
    # over every tenant; bytes_in oversubscribed (flagged, not scaled: SPLIT's default above was not scaled)
    [bytes_in] = [line for line in out.splitlines() if line.startswith("capacity bytes_in: the table commits ")]
    at_once = float(re.search(r"commits ([\d,.]+) B/s", bytes_in)[1].replace(",", ""))
    every = float(re.search(r"; ([\d,.]+) summed over every tenant", bytes_in)[1].replace(",", ""))
    assert 1000 < at_once <= every and " of 1,000: " in bytes_in and bytes_in.endswith("%: OVERSUBSCRIBED")
    [connections] = [line for line in out.splitlines() if line.startswith("capacity connections: ")]
    assert "OVERSUBSCRIBED" not in connections and "capacity bytes_in: the table commits" in report_text
    steps = [line for line in err.splitlines() if line.startswith("analyze [")]
    assert [line.split(" (")[0] for line in steps] == [
        "analyze [1/6] reading the usage log",
        "analyze [2/6] per-interval totals and the statistics per tenant, user and IP",
        "analyze [3/6] top offenders",
        "analyze [4/6] recommendations",
        "analyze [5/6] replay of the logged demand under today's quotas and the candidate",
        "analyze [6/6] report",
    ]
    jobs, tasks = zip(*(map(int, re.search(r"Spark: (\d+) jobs, (\d+) tasks done", line).groups()) for line in steps))
    assert jobs[0] == tasks[0] == 0 and list(jobs) == sorted(jobs) and jobs[-1] > 0 and tasks[-1] >= jobs[-1]
    assert spark.range(1).count() == 1
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None  # the session's next jobs not ours


def test_the_proxys_settings_that_cannot_be_used_are_refused_before_any_work(tmp_path, capsys):
    from analytics.cli import main

    bad = tmp_path / "proxy.yaml"
    bad.write_text("settings:\n  quota.window.nums: 11\n  controller.quota.window.size.seconds: 0\n")
    argv = ["analyze", "--input", str(tmp_path / "none"), "--output", str(tmp_path / "out")]
    assert main([*argv, "--proxy-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"kafka-quota-proxy analyze: --proxy-config {bad}: 2 errors:" in err
    assert "settings.quota.window.nums" in err and "quota.window.num" in err  # the key, and what it may have meant
    assert "settings.controller.quota.window.size.seconds" in err
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--quota-window-s", "1.5"])
    assert exited.value.code == 2
    refused = "quota.window.size.seconds is a whole number from 1 to 3600 in the proxy, got '1.5'"
    assert refused in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*argv, "--fleet-default", "0"])
    assert "a percentile above 0 and at most 100, got '0'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_log_mixing_scopes_is_refused_naming_them(spark, tmp_path, capsys):
    from analytics.cli import main

    (tmp_path / "usage").mkdir()
    write_jsonl(
        str(tmp_path / "usage" / "a.jsonl"),
        [
            record(START_TIME + DT, DT, "PLAINTEXT", "192.0.2.1", "u", "c", "Produce", request_bytes=1, proxy="a:1"),
            record(
                START_TIME + DT,
                DT,
                "PLAINTEXT",
                "192.0.2.1",
                "u",
                "c",
                "Produce",
                request_bytes=1,
                proxy="b:1",
                scope="cluster",
            ),
        ],
    )
    assert main(["analyze", "--input", str(tmp_path / "usage"), "--output", str(tmp_path / "out")]) == 1
    assert (
        "kafka-quota-proxy analyze: the log mixes quota.scope broker (1 records from a:1) and cluster (1 records "
        "from b:1)"
    ) in capsys.readouterr().err


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
    items = quota_items(result["out"])
    assert config.quotas.limit("producer_byte_rate", "known", "exact") == 150_000
    assert config.connections.ip_rate(KNOWN_IP) == item_for(items, ip=KNOWN_IP)["connection_creation_rate"]
    assert config.topic_quotas.resolve_topic("producer_byte_rate", "orders").limit == 150_000
    assert config.group_quotas.resolve("request_rate", "", "payments").limit == 1.0
    assert (
        config.quotas.limit("request_rate", *STORM)
        == item_for(items, user=STORM[0], client_id=STORM[1])["request_rate"]
    )


def test_a_quota_group_is_recommended_its_members_sum_and_its_members_no_entry_of_their_own(spark, result):
    """group_records(): the group's rates are its members' added up per interval, and its demand their summed
    demand as analytics.demand.summed_demand_rate reads the same records (its Python twin); the entry names its
    members as the proxy reads them and holds their 400,000 B/s together x 1.5; the members have no
    producer_byte_rate of their own (one would take them out of the group); the report shows the members, the
    commands say the entry goes in the file."""
    from config.loader import load_config_text

    rows = {r["api"]: r.asDict() for r in spark.read.parquet(str(result["out"] / "group_stats")).collect()}
    assert set(rows) == {"Produce", "*", "request_rate"}
    row = rows["Produce"]
    assert (row["user"], row["api"], row["intervals"], row["request_rate_max"]) == (GROUP, "Produce", 60, 400_000)
    assert (row["held_intervals"], row["quota_rate"]) == (10, 250_000)
    series = [
        [
            (r["time"], DT, r["request_bytes"], r["requests"], r["throttles"], r["held_ms"])
            for r in group_records()
            if r["user"] == user
        ]
        for user, _ in MEMBERS
    ]
    assert row["request_demand"] == pytest.approx(demand.summed_demand_rate(series, 250_000.0)) == 400_000
    # group_key_records(): the requests' demand as the Python twin reads the members' Metadata records
    requests = [
        [
            (r["time"], DT, r["requests"], r["requests"], sum((r["held_by"] or {}).values()), r["held_ms"])
            for r in group_key_records()
            if r["user"] == user and r["api"] == "Metadata"
        ]
        for user, _ in MEMBERS
    ]
    counted = rows["request_rate"]
    assert (counted["rate_p99"], counted["held_intervals"]) == (pytest.approx(0.5), 10)
    assert counted["demand"] == pytest.approx(demand.summed_demand_rate(requests, None)) == pytest.approx(0.8)
    assert (rows["*"]["mutations_max_interval"], rows["*"]["new_pids_max_interval"]) == (55, 2)
    items = quota_items(result["out"])
    assert item_for(items, quota_group=GROUP) == {
        "users": ["grp-a", "grp-b"],
        "producer_byte_rate": 600_000,
        "controller_mutation_rate": 5.0,  # 55 at once in a bucket of 11 s
        "producer_ids_rate": 450.0,  # p99 0.082 new producer ids/s x 3600 x 1.5
        "request_rate": 1.2,  # 0.8 requests/s x 1.5, its members' summed demand
    }
    assert not [it for it in items if it["entity"].get("user") in ("grp-a", "grp-b")]
    base = "upstream: {bootstrap_servers: ['127.0.0.1:9092']}\nlisteners: [{name: L, bind: '127.0.0.1:0'}]\n"
    config = load_config_text(base + (result["out"] / "recommended-quotas.yaml").read_text())
    assert config.quotas.resolve("producer_byte_rate", "grp-b", "etl").entity.path == f"/quota-groups/{GROUP}"
    assert escape(f"quota-group={GROUP} (users: grp-a, grp-b)") in (result["out"] / "report.html").read_text()
    commands = (result["out"] / "recommended-commands.txt").read_text().splitlines()
    assert "quota groups are set in the file only" in " ".join(line.removeprefix("# ") for line in commands)


def test_topic_byte_rates_and_request_rates_are_recommended_and_their_offenders_held(result):
    """named_records(): each topic the log names and each client entity and group gets its own figure on the
    byte rates' rule (a request rate at least 1/s); the topic far above the topics is named and held to their
    figure; the <default> sums give no figure of their own, and every output says so."""
    items = quota_items(result["out"])
    # 99,000 B/s x 1.5 -> 150,000; 49,500 x 1.5 = 74,250 -> 75,000
    assert item_for(items, topic="orders") == {"producer_byte_rate": 150_000, "consumer_byte_rate": 75_000}
    assert [item_for(items, topic=t)["producer_byte_rate"] for t in STEADY_TOPICS] == [60_000, 90_000, 120_000, 150_000]
    found = {(tuple(o.entity.items()), o.key): o for o in result["outliers"]}
    firehose = found[((("topic", FIREHOSE),), "producer_byte_rate")]
    assert (firehose.figure, firehose.limit, firehose.legitimate) == (15_000_000, 150_000, False)
    assert item_for(items, topic=FIREHOSE) == {"producer_byte_rate": 150_000}  # held to the topics' p99
    assert item_for(items, user=STORM[0], client_id=STORM[1]) == {"request_rate": 15.0}  # 9.9 requests/s x 1.5
    assert item_for(items, user="user-0", client_id="app-0")["request_rate"] == 1.0  # 0.1/s x 1.5: at least 1/s
    # POLLER: let through 1.2 requests/s; free 5 s of the held intervals, sending 9 not held: 1.8/s x 1.5
    assert item_for(items, user=POLLER[0], client_id=POLLER[1]) == {"request_rate": 2.7}
    said = result["basis"][(("client-id", POLLER[1]), ("user", POLLER[0]))]["request_rate"]
    assert "held by a quota in 50 of 101 intervals" in said and "estimated demand 1.8 requests/s" in said
    assert item_for(items, group="payments") == {"request_rate": 1.0}  # 0.5/s x 1.5 = 0.75: at least 1/s
    # orders/3: p99 19,800 B/s x 1.5 = 29,700 -> 30,000, its YAML entry as the operator pastes it
    assert item_for(items, topic="orders", partition=3) == {"producer_byte_rate": 30_000}
    named = [it["entity"] for it in items if set(it["entity"]) & {"topic", "group"}]
    assert not any(DEFAULT in entity.values() for entity in named)  # the sums give no figure
    text = (result["out"] / "recommended-quotas.yaml").read_text()
    assert "- entity: {topic: orders, partition: 3}" in text
    assert "partitions of orders under <default> (producer_byte_rate) are logged together" in text
    assert "topic=orders partition=3" in (result["out"] / "report.html").read_text()
    assert "topics under <default> (producer_byte_rate) are logged together" in text
    assert "groups under <default> (request_rate) are logged together" in text
    commands = (result["out"] / "recommended-commands.txt").read_text().splitlines()
    at = commands.index(
        "kafka-quota-proxy configs --bootstrap-server HOST:PORT --alter --entity-type topics --entity-name "
        f"{FIREHOSE} --add-config producer_byte_rate=150000"
    )
    evidence = commands[at - 3 : at]  # the offender's evidence, wrapped, just above its command
    assert evidence[0].startswith("# producer_byte_rate: offender:")
    assert "--legitimate topics=firehose" in " ".join(line[2:] for line in evidence)
    assert (
        "kafka-quota-proxy configs --bootstrap-server HOST:PORT --alter --entity-type groups --entity-name payments "
        "--add-config request_rate=1.0"
    ) in commands
    assert (
        "kafka-quota-proxy configs --bootstrap-server HOST:PORT --alter --entity-type topics --entity-name orders "
        "--entity-type partitions --entity-name 3 --add-config producer_byte_rate=30000"
    ) in commands


def test_throttled_tenants_demand_is_estimated_and_their_advice_marked(spark, result):
    """The job's estimate is the plain-Python one (tests/analytics/test_demand.py) on the same records; the
    recommendation rests on it, says so, and stays within 1.5 x the true demand; held shares stay within 0-1."""
    rows = {
        (r["user"], r["client_id"]): r
        for r in spark.read.parquet(str(result["out"] / "entity_stats")).where("api = 'Produce'").collect()
    }
    items = quota_items(result["out"])
    text = (result["out"] / "recommended-quotas.yaml").read_text()
    for name, (quota, _, true_demand, _, _) in THROTTLED.items():
        row = rows[name]
        assert row["quota_rate"] == quota and 0 < row["held_share"] <= 1
        assert row["request_demand"] == pytest.approx(true_demand, rel=0.10), name
        value = item_for(items, user=name[0], client_id=name[1])["producer_byte_rate"]
        assert value <= 1.5 * true_demand, (name, value)
        assert f"constrained by the current quota {quota:,} B/s" in text
    assert all(0 <= r["held_share"] <= 1 for r in rows.values())
    said = "\n".join(report.summary_lines(result))
    assert "user=steady client-id=over-quota producer_byte_rate" in said and "estimated demand" in said
    assert "rests on" in (result["out"] / "report.html").read_text()


def test_the_replay_shows_today_and_the_candidate_per_tenant(result):
    """--replay (the recommended table): the steady tenant held most of the time under today's 1 MB/s quota, and a
    small fraction of that under the recommended 4 MB/s (capped at 4 x; its 3 MB/s demand varies per request, so
    its noisiest intervals still meet the quota); the report has the table."""
    replayed = result["replay"]
    rows = {(r["user"], r["client_id"], r["api"]): r for r in replayed["rows"]}
    steady = rows[("steady", "over-quota", "Produce")]
    assert steady["quota_today"] == 1_000_000 and steady["today_held_s"] > 0.5 * 600
    assert steady["candidate_held_s"] < 0.2 * steady["today_held_s"]
    html_text = (result["out"] / "report.html").read_text()
    assert "Replay under the recommended table" in html_text and "replay under the recommended table" in "\n".join(
        report.summary_lines(result)
    )
    # group_records(): the group's two members replayed as one client against its one budget, today the 250,000
    # B/s the log says held them (their 400,000 together: held nearly always), after it the recommended 600,000
    (group,) = [r for r in replayed["rows"] if r["quota_group"] == GROUP]
    assert (group["api"], group["quota_today"], group["quota_candidate"]) == ("Produce", 250_000, 600_000)
    assert group["today_held_s"] > 0.9 * 600 and group["candidate_held_s"] < 0.1 * group["today_held_s"]
    assert not [r for r in rows if r[0] in ("grp-a", "grp-b")]  # no member replayed alone
    assert escape(f"quota-group={GROUP} (user=grp-a client-id=etl, user=grp-b client-id=etl)") in html_text


def test_capacity_counts_a_groups_one_limit_once_in_each_interval(spark):
    """Two members of a group active in one interval with a tenant of its own: the group's 1,000 B/s once, beside
    the tenant's 500 (1,500, not 2,500); in the next interval one member alone: 1,000."""
    from analytics import concurrency

    items = [
        {"entity": {"user": "a", "client-id": "x"}, "producer_byte_rate": 500},
        {"entity": {"quota-group": "team"}, "users": ["c", "d"], "producer_byte_rate": 1000},
    ]
    active = [("a", "x", 10.0), ("c", "1", 10.0), ("d", "2", 10.0), ("c", "1", 20.0)]
    schema = "user string, client_id string, api string, time double, request_rate double, response_rate double, mutation_rate double"
    entity = spark.createDataFrame([(u, c, "Produce", t, 100.0, 0.0, 0.0) for u, c, t in active], schema)
    ip = spark.createDataFrame([], "ip string, time double, connection_rate double")
    per_tenant, per_ip = concurrency.limits(items, {(u, c, "Produce") for u, c, _ in active}, [])
    busy = concurrency.committed(spark, entity, ip, per_tenant, per_ip)
    assert sorted(busy["bytes_in"]) == [(10.0, 1500.0, 2, 0), (20.0, 1000.0, 1, 0)]


def test_rates_are_on_the_quotas_window_and_the_burst_is_kept_as_a_burst(spark):
    """A stop-and-go tenant on 2 s log intervals (the demo's): 6 MB in one interval, then held through the next
    five (carried held time, nothing sent). Over the quota's 11 s window (6 intervals) its rate is 0.5 MB/s; its
    one-interval burst 3 MB/s is reported as the burst, not recommended (the per-interval p99 would give 4.5 MB/s)."""
    from analytics import recommend, stats

    recs = []
    for k in range(60):
        burst = k % 6 == 0
        recs.append(
            record(
                START_TIME + 2 * (k + 1),
                2.0,
                "PLAINTEXT",
                "192.0.2.9",
                "sg",
                "stop-and-go",
                "Produce",
                requests=6 if burst else 0,
                request_bytes=6_000_000 if burst else 0,
                throttle_ms=10_000 if burst else 0,
                held_ms=0 if burst else 2000,
                throttles=1 if burst else 0,
                quota_rate=500_000.0 if burst else None,
            )
        )
    frame = stats.entity_intervals(stats.on_grid(spark.createDataFrame(recs, stats.SCHEMA)), "cluster")
    [row] = stats.entity_stats(frame, stats.window_intervals(11, 2.0), 2.0).where("api = 'Produce'").collect()
    assert row["request_rate_p99"] == pytest.approx(500_000) and row["request_burst_max"] == pytest.approx(3_000_000)
    assert row["held_share"] == pytest.approx(50 / 60) and row["throttle_seconds"] == pytest.approx(100)
    value, basis = recommend.byte_rate_basis(row.asDict(), "request", recommend.Rules())
    assert value == 750_000 and "demand not measurable" in basis


def test_held_share_is_a_share_of_wall_time_beside_the_summed_throttle(spark, tmp_path):
    """Two connections from two IPs, each held 8 s of every 10 s (an older log without held_ms: its throttle_ms is
    read as held time): throttle time summed is 1.6 x the wall time, the held share at most 1."""
    from analytics import stats

    old = tmp_path / "old.jsonl"
    lines = []
    for k in range(10):
        for ip in ("192.0.2.1", "192.0.2.2"):
            rec = record(
                START_TIME + DT * (k + 1),
                DT,
                "PLAINTEXT",
                ip,
                "u",
                "two-conns",
                "Produce",
                requests=5,
                request_bytes=1_000_000,
                throttle_ms=8_000,
            )
            for key in ("held_ms", "throttles", "quota_rate", "observed_rate_sum", "proxy", "broker", "scope"):
                del rec[key]
            lines.append(json.dumps(rec))
    old.write_text("\n".join(lines) + "\n")
    frame = stats.entity_intervals(stats.on_grid(stats.read_usage(spark, str(old))), "cluster")
    [row] = stats.entity_stats(frame).where("api = 'Produce'").collect()
    assert row["throttle_seconds"] == pytest.approx(160) and row["held_share"] == pytest.approx(1.0)
    assert row["request_demand"] is None  # no quota in the log: held, but not by a byte rate it names
