"""Who is on the other end of one client connection: what the quota lookups and the internal-topic guard read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from proxy.session.sasl import SaslExchange


@dataclass(slots=True)
class Session:
    """Who is on the other end of one client connection: what quota lookups use."""

    listener: str
    peer_ip: str
    peer: tuple | None = None  # (ip, port) of the client, and the address it connected to: whether the
    local: tuple | None = None  # connection is the proxy's own (proxy.cluster.own_clients) is judged from both
    own_connection: bool | None = None  # ... once, when it first matters
    user: str = "ANONYMOUS"  # the principal: SASL (the user the broker accepted) or mTLS (the mapped subject)
    admin_listener: bool = False  # accepted on the admin listener (listeners[].admin): an admin whatever its principal
    producer_id: int = -1  # the last producer id checked against the producer-id quota on this connection
    producer_id_checked_ms: int = 0  # and when
    muted_for: str | None = None  # the client id of the request whose throttle last muted it (for explain)
    muted_by: str = ""  # the quota whose throttle that was (Throttle.by: "" when not said)
    held_bytes: int = 0  # bytes of Produce requests held on this connection for their new producer ids (KIP-936)
    sasl: SaslExchange | None = None  # the SASL exchange seen on this connection, if any
    request_limit: int = 2**31 - 1  # the largest request frame accepted now (smaller until SASL succeeds)
    authenticated_limit: int = 2**31 - 1  # ... and once it has
    awaiting_authentication: bool = False  # a SASL listener before the broker accepted an authentication
    broker_metadata_versions: tuple[int, int] | None = None  # Metadata versions the broker behind serves (its
    # ApiVersions answer on this connection; None before one): what the proxy's own lookups may send
    broker_lookup_versions: dict[int, tuple[int, int]] | None = None  # DescribeClientQuotas, AlterClientQuotas
    # and DescribeTransactions versions the broker serves ({api key: (min, max)}, without those it lacks; None before
    # an ApiVersions answer): whether the keys the brokers enforce (request_percentage) can be passed on, and whether
    # a transactional id can be looked up at PAUSE
    # the plan of this connection's last request of each API key that more than one stage planned, with its version
    # and the stages' plans it combines: reused while the stages return the same plans (proxy.apis.stages.fold)
    plans: dict[int, tuple] = field(default_factory=dict)
    # the plan of this connection's last request of each API whose chain is reused (proxy.apis.reuse), with what
    # its stages read (and whether a second request got the very same plan): reused while that stays the same
    reused: dict[int, tuple] = field(default_factory=dict)

    def is_admin(self, admin_principals) -> bool:
        """May alter quotas and the proxy's settings and write its topics: on the admin listener, or a principal
        ``admin_principals`` lists."""
        return self.admin_listener or f"User:{self.user}" in admin_principals

    def through(self, api: str) -> str:
        """``api`` as the audit of a config change names it: with the admin listener, when the change came that way."""
        return f"{api} on admin listener {self.listener}" if self.admin_listener else api

    def authenticated(self, principal: str | None) -> None:
        """The broker accepted a SASL authentication (or re-authentication) as ``principal`` (None: a mechanism
        whose tokens the proxy cannot read, e.g. GSSAPI; the connection keeps the principal it had)."""
        if principal is not None:
            self.user = principal
        self.request_limit = self.authenticated_limit
        self.awaiting_authentication = False
