"""Opening a client's broker connection: each of the listener's bootstrap servers in turn, within
``upstream.connect.timeout.ms``, over TLS when the listener's brokers are reached by TLS.

A server that cannot be reached is logged, counted (``upstream_errors``, ``connect``) and the next one tried; when
none answers, readiness is told (``ListenerContext.on_upstream_result``). Running out of file descriptors is the
proxy's own limit, not a broker's fault: no other server is tried.
"""

from __future__ import annotations

import asyncio
import errno
import logging

from config.model import Address
from proxy.connection.broker_socket import BrokerReader, UpstreamConnection
from proxy.connection.client_context import ListenerContext, log_fields
from proxy.ground.tasks import wait_for

log = logging.getLogger(__name__)

FD_EXHAUSTED = "fd_exhausted"  # why the client is closed (connections_closed's reason)
UPSTREAM_UNREACHABLE = "upstream_unreachable"


async def dial_broker(
    ctx: ListenerContext, events: BrokerReader, peer: str
) -> tuple[UpstreamConnection, Address] | str:
    """The broker connection for client ``peer``, reporting to ``events``, and the address it reached; or why the
    client is to be closed (:data:`FD_EXHAUSTED`, :data:`UPSTREAM_UNREACHABLE`)."""
    loop = asyncio.get_running_loop()
    for address in ctx.upstreams():
        try:
            _, upstream = await wait_for(
                loop.create_connection(
                    lambda: UpstreamConnection(events),
                    address.host,
                    address.port,
                    ssl=ctx.upstream_ssl,
                    server_hostname=address.host if ctx.upstream_ssl else None,
                ),
                ctx.connect_timeout_s,
            )
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):  # the proxy's own limit, not the broker's fault
                log.error(
                    "out of file descriptors: cannot open a broker connection for client %s (raise the "
                    "open-files limit, or bound connections)",
                    peer,
                )
                ctx.metrics.fd_exhausted.labels(ctx.name).inc()
                return FD_EXHAUSTED
            reason = str(exc) or repr(exc)  # some OSErrors say nothing but their class (an empty line helps no one)
            log.warning(
                "cannot reach broker %s for client %s: %s", address, peer, reason, extra=log_fields(ctx, peer, address)
            )
            ctx.metrics.upstream_errors.labels(ctx.name, "connect").inc()
            continue
        except TimeoutError:
            log.warning(
                "cannot reach broker %s for client %s: timed out", address, peer, extra=log_fields(ctx, peer, address)
            )
            ctx.metrics.upstream_errors.labels(ctx.name, "connect").inc()
            continue
        return upstream, address
    ctx.on_upstream_result(False)
    return UPSTREAM_UNREACHABLE
