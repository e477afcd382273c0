"""proxy.cluster.token_owners: delegation tokens' owners, looked up with the proxy's own DescribeDelegationToken (a
fake OwnKafka here: what is asked, what it answers). Lookups are counted, never timed; the two tests that wait out
the lookup bound use a bound of 0.2 s and assert only what was handed back."""

from __future__ import annotations

import asyncio

from proxy.cluster.token_owners import OwnerUnknown, TokenOwners
from proxy.codec.apis import DESCRIBE_DELEGATION_TOKEN, OWN_DESCRIBE_DELEGATION_TOKEN_VERSION
from proxy.codec.error_codes import DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
from tests.fakes import TokenKafka as FakeKafka
from tests.fakes import token_answer as answer


def test_logins_waiting_together_are_served_by_one_lookup_of_every_token():
    """Fifty logins with two tokens at once: one DescribeDelegationToken (owners null: every token), each login
    handed its token's owner; the HMACs are not kept."""
    kafka = FakeKafka(answer({"tok-c": "carol", "tok-d": "dave"}))
    owners = TokenOwners(kafka, 30.0, min_interval_s=0.0)

    async def main():
        return await asyncio.gather(*(owners.resolve("tok-c" if i % 2 else "tok-d") for i in range(50)))

    got = asyncio.run(main())
    assert got == ["dave", "carol"] * 25
    assert kafka.asked == [(DESCRIBE_DELEGATION_TOKEN, OWN_DESCRIBE_DELEGATION_TOKEN_VERSION, None)]
    assert owners.owner("tok-c") == "carol" and len(owners) == 2 and owners.lookups == 1
    assert "hmac" not in repr(vars(owners))
    assert asyncio.run(owners.resolve("tok-d")) == "dave" and owners.lookups == 1  # known: nobody asked


def test_a_token_an_answer_does_not_list_yet_is_asked_for_again():
    """A token created a moment ago may reach the broker asked after the one that authenticated it."""
    kafka = FakeKafka(answer({"tok-c": "carol"}), answer({"tok-c": "carol", "tok-new": "dave"}))
    owners = TokenOwners(kafka, 30.0, min_interval_s=0.0)
    assert asyncio.run(owners.resolve("tok-new")) == "dave"
    assert len(kafka.asked) == 2


def test_an_owner_not_learnt_within_the_bound_is_unknown_and_says_why():
    for kafka, why in (
        (FakeKafka(None), "no broker answered"),
        (FakeKafka(answer({}, DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)), "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"),
        (FakeKafka(answer({"tok-c": "carol"})), "may describe"),
    ):
        owners = TokenOwners(kafka, 0.2, min_interval_s=0.05)
        got = asyncio.run(owners.resolve("tok-x"))
        assert isinstance(got, OwnerUnknown) and why in got.reason, (why, got)
        assert owners.owner("tok-x") is None
        assert 1 <= len(kafka.asked) <= 0.2 / 0.05 + 1  # asked again, but never more often than the interval


def test_no_kafka_leaves_every_owner_unknown_at_once():
    owners = TokenOwners(None, 30.0)
    assert isinstance(asyncio.run(owners.resolve("tok-c")), OwnerUnknown)
    owners.learn("tok-c", "carol")
    assert asyncio.run(owners.resolve("tok-c")) == "carol"


def test_owners_kept_are_bounded_the_wanted_token_first_least_recently_used_out():
    kafka = FakeKafka(answer({f"tok-{i}": f"user-{i}" for i in range(5)}))
    owners = TokenOwners(kafka, 30.0, max_tokens=3, min_interval_s=0.0)
    assert asyncio.run(owners.resolve("tok-4")) == "user-4"  # listed last, kept first
    assert len(owners) == 3 and owners.owner("tok-4") == "user-4"
    kept = [t for t in (f"tok-{i}" for i in range(4)) if owners.owner(t) is not None]
    assert len(kept) == 2
    owners.learn("tok-new", "erin")  # a login waits for it: the least recently used goes
    assert len(owners) == 3 and owners.owner("tok-new") == "erin"
    owners.learn("tok-spare", "frank", wanted=False)  # no room, nobody waits for it: not kept
    assert owners.owner("tok-spare") is None and len(owners) == 3


def test_too_many_waiting_logins_are_refused_at_once_and_stop_wakes_whoever_waits():
    class Silent(FakeKafka):
        async def ask_any(self, *args):
            self.asked.append(args)
            await asyncio.Event().wait()  # never answers

    kafka = Silent()
    owners = TokenOwners(kafka, 30.0, max_waiting=3, min_interval_s=0.0)

    async def main():
        waiting = [asyncio.ensure_future(owners.resolve(f"tok-{i}")) for i in range(3)]
        while not kafka.asked:
            await asyncio.sleep(0)
        over = await owners.resolve("tok-over")
        await owners.stop()
        return over, await asyncio.gather(*waiting)

    over, stopped = asyncio.run(main())
    assert isinstance(over, OwnerUnknown) and "more than 3" in over.reason
    assert all(isinstance(got, OwnerUnknown) for got in stopped) and len(kafka.asked) == 1


def test_a_lookup_that_raises_refuses_the_logins_waiting_saying_why_and_the_next_one_asks_again():
    class Broken(FakeKafka):
        async def ask_any(self, *args):
            self.asked.append(args)
            if len(self.asked) == 1:
                raise RuntimeError("decoder bug")
            return answer({"tok-c": "carol"})

    kafka = Broken()
    owners = TokenOwners(kafka, 0.2, min_interval_s=1.0)  # one lookup within the bound
    got = asyncio.run(owners.resolve("tok-c"))
    assert isinstance(got, OwnerUnknown) and "decoder bug" in got.reason
    owners = TokenOwners(kafka, 30.0, min_interval_s=0.0)
    assert asyncio.run(owners.resolve("tok-c")) == "carol"
