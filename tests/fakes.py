"""Stand-ins shared by tests that drive a connection core on bytes, and the proxy's own lookups."""

from __future__ import annotations

import asyncio

from proxy.codec.apis import DESCRIBE_DELEGATION_TOKEN, OWN_DESCRIBE_DELEGATION_TOKEN_VERSION
from proxy.codec.messages import new_response


class NullApiMetrics:
    """A :class:`proxy.ops.metrics.ApiMetrics` that records nothing."""

    def request(self, nbytes):
        pass

    def answered(self, nbytes, seconds):
        pass


NULL_API_METRICS = NullApiMetrics()


def token_answer(tokens: dict[str, str], error_code: int = 0):
    """A DescribeDelegationToken answer listing ``tokens`` (id -> owner), each with its HMAC."""
    return new_response(
        DESCRIBE_DELEGATION_TOKEN,
        OWN_DESCRIBE_DELEGATION_TOKEN_VERSION,
        error_code=error_code,
        tokens=[
            {
                "principal_type": "User",
                "principal_name": owner,
                "token_id": token_id,
                "token_requester_principal_type": "User",
                "token_requester_principal_name": "admin",
                "hmac": b"hmac-" + token_id.encode(),
            }
            for token_id, owner in tokens.items()
        ],
    )


class TokenKafka:
    """Answers each DescribeDelegationToken with the next of ``answers`` (None: no broker answered); the last one
    again once they run out."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked = []

    async def ask_any(self, api_key, version, request, timeout_s, client_id):
        self.asked.append((api_key, version, request.owners))
        await asyncio.sleep(0)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
