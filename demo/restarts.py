"""``make demo``'s producer-restart loop: KIP-936's ``producer_ids_rate``, new producer ids held in the proxy past the
bucket's burst until the quota lets them through, judged from what the producers saw (:func:`producer_restarts`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from config.model import ProxyConfig

RESTARTER = "demo-restarter"
RESTARTS = 10
RESTART_TOPIC = "restarts"


@dataclass(frozen=True)
class RestartResult:
    held: tuple[bool, ...]  # per producer, in order: was its Produce held in the proxy (the held-requests counter)
    waited: tuple[float, ...]  # and seconds from its send to its acknowledgement
    acknowledged: int
    burst: int
    token_s: float  # seconds between two tokens of the bucket: W / producer_ids_rate
    elapsed: float  # seconds from the first producer's send to the last one's acknowledgement

    @property
    def allowed(self) -> float:
        """New ids the bucket lets through in ``elapsed``: its burst, one per token time, and the one then due."""
        return self.burst + self.elapsed / self.token_s + 1

    @property
    def outpaced(self) -> bool:
        """Whether the restarts came faster than the bucket refills: more ids than its burst and the tokens of the
        time they took, so that some must have waited. A machine busy enough to start each producer in about a
        token's time (0.6-0.8 s seen in a loaded make test) gives the bucket time to refill, and none need wait."""
        return len(self.held) > self.burst + self.elapsed / self.token_s

    @property
    def ok(self) -> bool:
        """Every message acknowledged; the burst passed unheld; some producer was held whenever the restarts
        outpaced the bucket; and no more ids went through than the bucket allows. How many were held depends on
        how fast the producers start, so the pattern past the burst is reported, not judged."""
        n = min(self.burst, len(self.held))
        return (
            self.acknowledged == len(self.held)
            and not any(self.held[:n])
            and (any(self.held) or not self.outpaced)
            and len(self.held) <= self.allowed
        )

    def text(self) -> str:
        marks = "".join("H" if h else "." for h in self.held)
        waits = [w for w, h in zip(self.waited, self.held) if h]
        held = (
            f"held ones acknowledged after {min(waits):.1f}-{max(waits):.1f} s"
            if waits
            else "none held"
            if self.outpaced
            else "none held: they came no faster than the tokens"
        )
        return (
            f"producer restarts ({RESTARTER}): {len(self.held)} idempotent producers, one after another, "
            f"each a new producer id: [{marks}] (H: held in the proxy before the broker saw its id); the first "
            f"{self.burst} pass at once, later ones wait for their token (one each {self.token_s:g} s; {held}); "
            f"{len(self.held)} ids in {self.elapsed:.1f} s, the bucket allows {self.allowed:.0f}; "
            f"{self.acknowledged}/{len(self.held)} messages acknowledged  {'OK' if self.ok else 'FAIL'}"
        )


def producer_restarts(
    bootstrap: str,
    config: ProxyConfig,
    report: Callable[[str], None],
    held_requests: Callable[[], float],
    restarts: int = RESTARTS,
) -> RestartResult:
    """A producer-restart loop (the KIP-936 use case): each kafka-python idempotent producer sends one message and
    closes; its Produce carries a new producer id. Past the bucket's burst each one is held in the proxy until the
    bucket has a token for its id (``producer.id.quota.enforcement: hold``): seen in the proxy's
    ``producer_ids_held_requests_total`` (``held_requests`` reads it) and in the time to its acknowledgement."""
    from kafka import KafkaProducer

    settings = config.settings
    limit = config.quotas.limit("producer_ids_rate", "ANONYMOUS", "")
    burst = int(limit * settings.producer_id_quota_window_num)
    held, waited = [], []

    def start() -> KafkaProducer:
        return KafkaProducer(bootstrap_servers=bootstrap, client_id=RESTARTER, enable_idempotence=True, acks="all")

    # The next two producers start (bootstrap, metadata) while one sends, as a tight restart loop's would: on a busy
    # machine a start alone took about as long as the bucket takes to refill one token (0.6 s), and no id was held.
    with ThreadPoolExecutor(2) as pool:
        upcoming = [pool.submit(start) for _ in range(min(2, restarts))]
        try:
            for i in range(restarts):
                producer = upcoming.pop(0).result()
                if i + len(upcoming) + 1 < restarts:
                    upcoming.append(pool.submit(start))
                before = held_requests()
                try:
                    sent = time.monotonic()
                    producer.send(RESTART_TOPIC, f"restart {i}".encode()).get(30)
                    waited.append((sent, time.monotonic()))
                finally:
                    producer.close(5)
                held.append(held_requests() > before)
        finally:
            for rest in upcoming:  # none left unless a send failed
                rest.result().close(5)
    acknowledged = len(waited)
    began = waited[0][0] if waited else 0.0
    last_ack = waited[-1][1] if waited else 0.0
    waits = [done - sent for sent, done in waited]
    result = RestartResult(
        tuple(held),
        tuple(waits),
        acknowledged,
        burst,
        settings.producer_id_quota_window_size_seconds / limit,
        (last_ack - began) if acknowledged else 0.0,
    )
    report(result.text())
    return result
