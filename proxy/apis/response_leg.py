"""What the response to one forwarded request needs besides its bytes: its response leg, one named value.

A request's plan (:class:`proxy.apis.Plan`, at its header) and its outcome (:class:`proxy.apis.ForwardRequest`,
on its body) each own the leg the broker's answer must go through on its way back: observers that learn from it
(SASL outcomes, partition counts, producer ids), rewrites (broker addresses, the items the proxy kept back), the
consumer byte rate charged on the size the client gets, a settlement of the throttle from what the broker did
(KIP-599 refunds), and what all that accounted for, as data (:class:`~proxy.apis.usage.Usage`: tokens given back,
a shadow throttle) that the response path records. :class:`ResponseLeg` holds them; :meth:`ResponseLeg.then` is the one way two legs combine,
so a stage added next month cannot be dropped by a copy. The response path runs a leg once, on the whole
response (:meth:`ResponseLeg.run`); a response whose request has :data:`NO_LEG` and no throttle streams through.

The proxy's own lookups (a Metadata request of its own, before a request is decided) have a leg too: ``lookup``
takes the answer's body, which never goes to the client.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from proxy.apis.guards import Chained
from proxy.apis.usage import Usage
from quota.primitives.decision import FORWARD, Decision, Throttle, combined, is_applied, longest

Rewrite = Callable[[memoryview], "bytes | None"]
Observe = Callable[[memoryview], None]
Settle = Callable[[Throttle], Throttle]
Charge = Callable[[int], Decision]
Account = Callable[[Usage], None]  # records usage learnt only after the response went out
Accounted = Callable[[Account], Usage]


@dataclass(frozen=True, slots=True)
class ResponseLeg:
    # reads the broker's response body (before any rewrite) to learn from it; changes nothing
    observe: Observe | None = None
    # returns the new response body, or None to keep the broker's
    rewrite: Rewrite | None = None
    # decides a throttle from the size of the response the client gets (consumer byte rate)
    record_response: Charge | None = None
    # revises the request's throttle once the broker's answer was observed and rewritten (KIP-599 refunds)
    settle: Settle | None = None
    # the proxy's own lookup: takes the answer's body; the answer never goes to the client
    lookup: Callable[[memoryview], None] | None = None
    # once the leg ran: what it accounted for (KIP-599 tokens given back or charged more, a shadow consumer
    # throttle), as data the response path records; given where to record what is learnt only later (a count the
    # proxy looks up after the response went out)
    accounted: Accounted | None = None
    # a hint: the rewrite keeps the broker's body unless the response carries this top-level tagged field (KIP-951's
    # NodeEndpoints, there only when a leader moved); the rewrite checks it itself, and a response path may look for
    # the tag first and skip the call. Not carried into a combined leg (whose rewrite still checks).
    unless_tagged: int | None = None
    # derived: a rewrite alone (or nothing): nothing observed, charged, settled, accounted or looked up, so run()
    # without a throttle gives (rewrite(body), None); the response path calls the rewrite itself then
    rewrite_alone: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "rewrite_alone",
            self.observe is None
            and self.record_response is None
            and self.settle is None
            and self.accounted is None
            and self.lookup is None,
        )

    def then(self, more: ResponseLeg) -> ResponseLeg:
        """This leg, then ``more``: observers both, in order, on the broker's body; ``more``'s rewrite applied to
        what this one produced; both response records charged (the longest throttle wins); settlements in turn; what both
        accounted for, added."""
        if more is NO_LEG:
            return self
        if self is NO_LEG:
            return more
        if self.lookup is not None or more.lookup is not None:
            raise ValueError("a lookup's leg does not combine")
        if self.rewrite_alone:  # cluster mode's node endpoints before a Fetch's quota: the rule, made short
            return ResponseLeg(
                observe=more.observe,
                rewrite=_chained(self.rewrite, more.rewrite),
                record_response=more.record_response,
                settle=more.settle,
                accounted=more.accounted,
            )
        return ResponseLeg(
            observe=_both(self.observe, more.observe),
            rewrite=_chained(self.rewrite, more.rewrite),
            record_response=_charged(self.record_response, more.record_response),
            settle=_settled(self.settle, more.settle),
            accounted=_added(self.accounted, more.accounted),
        )

    def run(
        self, body: memoryview, size: Callable[[bytes | None], int], throttle: Throttle | None
    ) -> tuple[bytes | None, Throttle | None]:
        """Run the leg on the broker's response ``body``: the new body (None: the broker's stays) and the throttle
        the response carries, from the request's ``throttle`` so far; ``size(body)`` is the frame the client
        gets. Raises ValueError when a rewritten message cannot be encoded."""
        if self.observe is not None:
            self.observe(body)
        rewritten = self.rewrite(body) if self.rewrite is not None else None
        if self.record_response is not None:  # charged as the client will receive it (after any trimming)
            decision = self.record_response(size(rewritten))
            if decision is not FORWARD:  # a forward leaves the throttle as it was (combined, without the call)
                throttle = combined(throttle, decision)
        if self.settle is not None and throttle is not None:  # from what the broker did
            throttle = self.settle(throttle)
        return rewritten, throttle


NO_LEG = ResponseLeg()


def _both(first: Observe | None, second: Observe | None) -> Observe | None:
    if first is None or second is None:
        return first or second

    def both(body: memoryview) -> None:
        first(body)
        second(body)

    return both


def _chained(first: Rewrite | None, second: Rewrite | None) -> Rewrite | None:
    """``second`` applied to the body ``first`` produced (or to the broker's, when ``first`` keeps it)."""
    if first is None or second is None:
        return first or second
    return Chained(first, second)  # (proxy.apis.guards: compiled where the extension runs)


def _charged(first: Charge | None, second: Charge | None) -> Charge | None:
    if first is None or second is None:
        return first or second

    def charged(nbytes: int) -> Decision:
        a, b = first(nbytes), second(nbytes)
        if not isinstance(a, Throttle) or not is_applied(a):
            return b
        return a if not isinstance(b, Throttle) or not is_applied(b) else longest(a, b)

    return charged


def _settled(first: Settle | None, second: Settle | None) -> Settle | None:
    if first is None or second is None:
        return first or second

    def settled(throttle: Throttle) -> Throttle:
        return second(first(throttle))

    return settled


def _added(first: Accounted | None, second: Accounted | None) -> Accounted | None:
    if first is None or second is None:
        return first or second

    def added(later: Account) -> Usage:
        return first(later) + second(later)

    return added
