"""A worker's claims on its parent's open-connection counts (proxy.connection.open_gate), without a parent process:
what is sent, how answers, a late answer and a lost link end a claim."""

from __future__ import annotations

import asyncio
import json

from proxy.connection import open_gate
from proxy.connection.open_gate import CLAIMED, UNCLAIMED, OpenGate
from quota.primitives.peer_connections import IP


def test_a_single_process_admits_at_once_without_a_claim():
    assert asyncio.run(OpenGate().claim("L", "a", (1, None, None))) == UNCLAIMED


def test_claims_are_answered_by_id_and_releases_sent():
    sent: list[tuple[bytes, list]] = []
    gate = OpenGate()
    gate.attach(lambda what, payload: sent.append((what, json.loads(payload))))

    async def run():
        first = asyncio.ensure_future(gate.claim("L", "a", (1, None, None)))
        second = asyncio.ensure_future(gate.claim("L", "a", (1, None, None)))
        await asyncio.sleep(0)
        (_, one), (_, two) = sent
        gate.answered(json.dumps([two[0], IP]).encode())  # answers in any order
        gate.answered(json.dumps([one[0], None]).encode())
        return await first, await second

    assert asyncio.run(run()) == (CLAIMED, IP)
    assert [what for what, _ in sent] == [b"claim", b"claim"]
    assert sent[0][1][1:] == ["L", "a", 1, None, None]
    gate.release("L", "a")
    assert sent[-1] == (b"release", ["L", "a"])


def test_a_claim_answered_too_late_is_admitted_and_then_released(monkeypatch):
    monkeypatch.setattr(open_gate, "CLAIM_TIMEOUT_S", 0.01)
    sent: list[tuple[bytes, list]] = []
    gate = OpenGate()
    gate.attach(lambda what, payload: sent.append((what, json.loads(payload))))
    assert asyncio.run(gate.claim("L", "a", (1, None, None))) == UNCLAIMED
    gate.answered(json.dumps([sent[0][1][0], None]).encode())  # the parent counted it after all
    assert sent[-1] == (b"release", ["L", "a"])
    assert gate.timeouts == 1


def test_a_lost_link_admits_the_claims_waiting():
    gate = OpenGate()
    gate.attach(lambda what, payload: None)

    async def run():
        waiting = asyncio.ensure_future(gate.claim("L", "a", (1, None, None)))
        await asyncio.sleep(0)
        gate.lost()
        return await waiting

    assert asyncio.run(run()) == UNCLAIMED
    assert not gate.shared
