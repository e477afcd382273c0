"""Whether the connection's per-request hot path runs compiled: the C extension ``proxy.connection._native`` (built
from proxy/connection/native/ where a C compiler is, optional) or the pure Python it mirrors, by the package's one
rule (:func:`quota.primitives.compiled.load_compiled`: ``KAFKA_QUOTA_PROXY_PURE_PYTHON=1`` keeps the pure Python).

Its parts are twins of pure classes kept as their references: the in-flight queue
(:class:`proxy.connection.inflight.PureInFlightQueue`), the response path's per-response methods with the broker
side's event loop (:class:`proxy.connection.response_frames.PureResponses`) and the request path's per-request methods
with the client side's (:class:`proxy.connection.request_frames.PureRequests`), the writes queued while a read is
split (:class:`proxy.connection.write_batch.PureWriteBatch`) and what the event loop calls at every read
(:class:`proxy.connection.shell.PureShell`, which hands the twin its sizes itself). Each choosing module binds its
class to one or the other once, at import, from :data:`NATIVE`.
"""

from __future__ import annotations

from types import ModuleType

from proxy.apis.plan import PASS, ForwardRequest
from proxy.apis.response_leg import NO_LEG
from proxy.apis.usage import NO_USAGE
from proxy.codec.errors import ProtocolError
from proxy.codec.frame import BOUNDARY, BUFFER, DROP, FRAME, HEADER, LAST_SEGMENT, NEED_DATA, SEGMENT, STREAM
from proxy.codec.header import response_header_length
from proxy.codec.skim import tagged_fields
from proxy.ops.metrics import LATENCY_BUCKETS, ApiMetrics
from proxy.ops.usage_table import NO_USAGE_RECORDER
from quota.primitives.compiled import load_compiled
from quota.primitives.decision import FORWARD


def configure(module: ModuleType) -> None:
    """Hand the extension the objects it compares with and raises (once per process; tests call it again)."""
    module.configure(
        NO_LEG,
        ProtocolError,
        NO_USAGE_RECORDER,
        PASS,
        NO_USAGE,
        HEADER,
        FRAME,
        NEED_DATA,
        LAST_SEGMENT,
        SEGMENT,
        BOUNDARY,
        STREAM,
        BUFFER,
        DROP,
        response_header_length,
        tagged_fields,
        ApiMetrics,
        LATENCY_BUCKETS,
        ForwardRequest,
        FORWARD,
    )


def _load() -> tuple[ModuleType | None, str]:
    """(the extension, or None for the pure Python; a line saying which and why)."""
    module, path = load_compiled("proxy.connection._native")
    if module is not None:
        configure(module)
    return module, path


NATIVE, PATH = _load()
"""The extension (None on the pure path) and a line saying which path runs, for the log and ``--version``."""
