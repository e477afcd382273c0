"""The synthetic usage log: every key in every record, seeded, rotated files gzipped."""

import gzip
import json

from analytics.generate import (
    FIELDS,
    HOG,
    LEGITIMATE,
    LEGITIMATE_FETCH_RATE,
    STORM_IP,
    Options,
    generate_records,
    main,
    write_log,
)


def read_all(path):
    records = []
    for f in sorted(path.iterdir()):
        opener = gzip.open if f.name.endswith(".gz") else open
        with opener(f, "rt") as fh:
            records += [json.loads(line) for line in fh]
    return records


def test_log_is_seeded_complete_and_rotated(tmp_path):
    n = write_log(str(tmp_path / "a"), Options(entities=5, intervals=12, seed=3))
    write_log(str(tmp_path / "b"), Options(entities=5, intervals=12, seed=3))
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == ["usage-00000.jsonl.gz", "usage-00001.jsonl.gz", "usage-00002.jsonl.gz", "usage.jsonl"]
    records = read_all(tmp_path / "a")
    assert len(records) == n and records == read_all(tmp_path / "b")
    assert all(tuple(r) == FIELDS for r in records)
    conns = [r for r in records if r["api"] is None]
    assert conns and all(
        r["user"] is None and r["client_id"] is None and r["ip"] and r["connections_opened"] > 0 for r in conns
    )
    assert any(r["ip"] == STORM_IP for r in conns)
    assert any((r["user"], r["client_id"]) == HOG for r in records)
    backup = [r for r in records if (r["user"], r["client_id"]) == LEGITIMATE]
    assert len(backup) == 12 and all(r["api"] == "Fetch" and r["throttle_ms"] == 0 for r in backup)
    assert all(0.95 <= r["response_bytes"] / (LEGITIMATE_FETCH_RATE * r["interval_s"]) <= 1.05 for r in backup)


def test_the_legitimate_tenant_leaves_the_others_as_they_were():
    """Its own random stream: with it or without it, every other record is the same."""
    mixed = [r for b in generate_records(Options(entities=5, intervals=6)) for r in b if r["user"] != LEGITIMATE[0]]
    alone = [r for b in generate_records(Options(entities=5, intervals=6, legitimate=False)) for r in b]
    assert mixed == alone


def test_one_record_per_entity_api_and_interval():
    for batch in generate_records(Options(entities=30, intervals=5)):
        keys = [(r["time"], r["ip"], r["user"], r["client_id"], r["api"]) for r in batch]
        assert len(keys) == len(set(keys))


def test_cli(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "--entities", "3", "--intervals", "4", "--seed", "9"]) == 0
    assert "records" in capsys.readouterr().out
