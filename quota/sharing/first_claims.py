"""The parent's record of which worker claimed a name first (``workers: N``): one charge for one topic that two
workers each saw created. Pure; the time comes with each claim.

Two first instances of a Kafka Streams application joining through two workers at the same moment each make the
group coordinator report the topology's internal topics missing, and each worker learns the topics' counts once they
are created; the topic is one, so its partitions are charged once: the worker whose claim reaches the parent first
charges them, the other gives its tokens back (:mod:`proxy.apis.streams_topics`). A name is remembered for the
``ttl_ms`` its claim carries (the proxy's trust in what it knows of a topic,
``controller.quota.metadata.max.age.ms``): a topic deleted and created again after that is a new creation, charged
again. At most ``max_names`` are remembered, the oldest forgotten first (a forgotten name is charged again: never
less than once)."""

from __future__ import annotations

MAX_NAMES = 100_000


class FirstClaims:
    __slots__ = ("max_names", "_claimed")

    def __init__(self, max_names: int = MAX_NAMES) -> None:
        if max_names < 1:
            raise ValueError("max_names must be at least 1")
        self.max_names = max_names
        self._claimed: dict[str, int] = {}  # name -> when its claim ends (ms), the earliest first

    def __len__(self) -> int:
        return len(self._claimed)

    def claim(self, name: str, now_ms: int, ttl_ms: int) -> bool:
        """True for the first claim of ``name`` within ``ttl_ms`` (the claimer charges it), False for any other."""
        claimed = self._claimed
        while claimed:  # the ends are in order when every claim has the same ttl; a longer one ends late, never early
            first = next(iter(claimed))
            if claimed[first] > now_ms:
                break
            del claimed[first]
        end = claimed.get(name)
        if end is not None and end > now_ms:
            return False
        claimed.pop(name, None)
        claimed[name] = now_ms + max(ttl_ms, 0)
        if len(claimed) > self.max_names:
            del claimed[next(iter(claimed))]
        return True
