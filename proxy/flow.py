"""One client connection's flow control: every reason either socket is not read, in one pure object.

No transport, no event loop: events come in as method calls, time is passed in (seconds, the loop's clock), and
the state comes out as plain values the socket code applies after every event (h11's connection object; Kafka's
``KafkaChannel`` mute states). The rules:

- **Back-pressure** stops reading at once, even in the middle of a frame: the broker socket's write buffer is full
  (stop reading the client), or the client socket's is (stop reading the broker).
- **Quota and bound reasons take effect only at a request frame boundary** (Kafka mutes a channel only after a
  complete request): a mute until a time, a throttled request whose response is not out yet, a request waiting
  for the proxy's own lookup before it is decided (KIP-599 partition counts), responses held
  for a KIP-13 delay, the in-flight bound reached (requests awaiting answers, or response bytes the client has
  not taken), and draining at shutdown. In the middle of a frame without back-pressure the client is always
  read, so a throttled request always reaches the broker whole and every reason has an exit.
- Bytes read past a boundary where a quota reason holds are **held back** here (the read-ahead) and replayed,
  frame by frame, once the reasons are gone; the socket code keeps reads small meanwhile, so this stays small.
- A response held for a throttle (Produce v0-5, KIP-13's original delay) keeps every later response behind it,
  in request order, and the broker is not read while anything is held.

An illegal transition (a reason lifted that was never set, a counter below zero) raises :class:`FlowError`.
"""

from __future__ import annotations

from collections import deque

from proxy.inflight import InFlightQueue


class FlowError(RuntimeError):
    """An event that cannot happen in the flow's current state: a bug in the caller, never a client's doing."""


class Flow:
    __slots__ = ("inflight", "max_inflight", "_mid_frame", "_broker_full", "_client_full", "_muted_until",
                 "_throttled", "_deciding", "held", "_draining", "_read_ahead", "_read_ahead_pos", "_requests")

    def __init__(self, max_inflight: int) -> None:
        if max_inflight < 1:
            raise ValueError(f"max_inflight must be at least 1, got {max_inflight}")
        self.inflight = InFlightQueue()  # requests read and not yet answered, in order
        self._requests = self.inflight.entries  # its entries, read for their number on the hot path
        self.max_inflight = max_inflight
        self._mid_frame = False  # a request frame has started and not ended
        self._broker_full = False  # back-pressure: the broker socket's write buffer is full
        self._client_full = False  # back-pressure: the client socket's write buffer is full (responses not taken)
        self._muted_until = 0.0  # quota mute: read no new request before this time (0: not muted)
        self._throttled = 0  # requests throttled when read whose response is not out yet
        self._deciding = 0  # requests waiting for the proxy's own lookup before they are decided
        # Responses held, in order: (release time, or 0 behind an earlier one; response frame; answers a throttled request)
        self.held: deque[tuple[float, bytes, bool]] = deque()
        self._draining = False
        self._read_ahead: bytearray | None = None  # request bytes read past a paused boundary
        self._read_ahead_pos = 0

    # -- what the socket code applies ---------------------------------------------------------------------------

    @property
    def paused_at_boundary(self) -> bool:
        """A reason that stops reading at the next request frame boundary holds."""
        return bool(self._muted_until or self._throttled or self._deciding or self.held or self._client_full
                    or self._draining or len(self._requests) >= self.max_inflight)

    @property
    def unhindered(self) -> bool:
        """Nothing holds either side and nothing waits: the common case, checked first on the hot path."""
        return not (self._muted_until or self._throttled or self._deciding or self.held or self._client_full
                    or self._broker_full or self._draining or self._read_ahead is not None) and len(self._requests) < self.max_inflight

    @property
    def reading_client(self) -> bool:
        if self._broker_full:
            return False
        if self._mid_frame:
            return True
        return self._read_ahead is None and not self.paused_at_boundary

    @property
    def reading_broker(self) -> bool:
        return not self._client_full and not self.held

    @property
    def at_bound(self) -> bool:
        """Reading is stopped by the in-flight bound (requests or unsent response bytes), not by a quota."""
        return not self._mid_frame and (self._client_full or len(self._requests) >= self.max_inflight)

    @property
    def mid_frame(self) -> bool:
        return self._mid_frame

    @property
    def holding(self) -> bool:
        return bool(self.held)

    @property
    def draining(self) -> bool:
        return self._draining

    @property
    def drained(self) -> bool:
        """Draining, at a boundary, and every request answered and sent: the connection may close."""
        return (self._draining and not self._mid_frame and not self.held
                and not self.inflight.awaiting_response())

    def next_deadline(self) -> float | None:
        """The earliest time something changes by itself (a mute ends, a held response is due), or None."""
        deadline = self._muted_until or None
        if self.held:
            first = self.held[0][0]
            if first and (deadline is None or first < deadline):
                deadline = first
        return deadline

    # -- request frames ------------------------------------------------------------------------------------------

    def start_frame(self) -> bool:
        """Asked at a request frame boundary before its first byte is taken: False while a reason pauses reading
        there; True means the frame has started (reading goes on, back-pressure aside, until it ends)."""
        if self._mid_frame:
            raise FlowError("a request frame started inside another")
        if self._muted_until or self._throttled or self._deciding or self.held or self._client_full \
                or self._draining or len(self._requests) >= self.max_inflight:
            return False
        self._mid_frame = True
        return True

    def frame_ended(self) -> None:
        if not self._mid_frame:
            raise FlowError("a request frame ended that never started")
        self._mid_frame = False

    def hold_back(self, data) -> None:
        """Request bytes read past a boundary where reading paused; replayed by :meth:`take_read_ahead`."""
        if self._mid_frame:
            raise FlowError("read-ahead held back in the middle of a frame")
        if not len(data):
            return
        if self._read_ahead is not None:
            raise FlowError("read-ahead held back while earlier read-ahead is still held")
        self._read_ahead = bytearray(data)
        self._read_ahead_pos = 0

    @property
    def read_ahead_bytes(self) -> int:
        return 0 if self._read_ahead is None else len(self._read_ahead) - self._read_ahead_pos

    def read_ahead_due(self) -> bool:
        """Held-back bytes may be replayed now (nothing holds reading at the boundary, no back-pressure)."""
        return self._read_ahead is not None and not self._broker_full and not self.paused_at_boundary

    def take_read_ahead(self) -> memoryview:
        """The held-back bytes, to feed again; give back what was not consumed with :meth:`consumed_read_ahead`."""
        if self._read_ahead is None:
            raise FlowError("no read-ahead is held")
        return memoryview(self._read_ahead)[self._read_ahead_pos:]

    def consumed_read_ahead(self, nbytes: int) -> None:
        """``nbytes`` of :meth:`take_read_ahead`'s view were consumed; the rest stays held (no copy)."""
        if self._read_ahead is None or nbytes > self.read_ahead_bytes:
            raise FlowError("more read-ahead consumed than held")
        self._read_ahead_pos += nbytes
        if self._read_ahead_pos == len(self._read_ahead):
            self._read_ahead = None
            self._read_ahead_pos = 0

    # -- back-pressure -----------------------------------------------------------------------------------------

    def broker_backpressure(self, on: bool) -> None:
        if on == self._broker_full:
            raise FlowError(f"broker back-pressure {'set' if on else 'lifted'} twice")
        self._broker_full = on

    def client_backpressure(self, on: bool) -> None:
        if on == self._client_full:
            raise FlowError(f"client back-pressure {'set' if on else 'lifted'} twice")
        self._client_full = on

    # -- quota outcomes ----------------------------------------------------------------------------------------

    def mute(self, now: float, mute_ms: int) -> None:
        """Read no new request for ``mute_ms`` from ``now``; a longer mute already in place is kept."""
        if mute_ms < 0:
            raise FlowError(f"negative mute {mute_ms} ms")
        if mute_ms:
            self._muted_until = max(self._muted_until, now + mute_ms / 1000.0)

    def request_throttled(self) -> None:
        """A throttle was decided with a request that expects a response: read nothing more until it is out."""
        self._throttled += 1

    def throttled_response_out(self) -> None:
        if not self._throttled:
            raise FlowError("a throttled response went out with no throttled request in flight")
        self._throttled -= 1

    def request_deciding(self) -> None:
        """A request waits for the answer to the proxy's own lookup before it is decided: read nothing more until
        it is (its outcome keeps its place in the response order)."""
        self._deciding += 1

    def request_decided(self) -> None:
        if not self._deciding:
            raise FlowError("a request was decided that was not waiting for a lookup")
        self._deciding -= 1

    # -- responses to the client ---------------------------------------------------------------------------------

    def response(self, frame) -> bool:
        """A response (or part of one) to the client: True to write it now, False when it waits behind a held one
        (then the flow keeps a copy and hands it out from :meth:`tick` in order)."""
        if not self.held:
            return True
        self.held.append((0.0, bytes(frame), False))
        return False

    def hold_response(self, frame: bytes, release_at: float, throttled: bool) -> None:
        """KIP-13's delay: this response, and every one after it, goes out at ``release_at``. ``throttled``: it
        answers a request counted by :meth:`request_throttled`."""
        self.held.append((release_at, bytes(frame), throttled))

    def tick(self, now: float) -> list[bytes]:
        """Time has passed: end an expired mute; return the held responses now due, in order."""
        if self._muted_until and self._muted_until <= now:
            self._muted_until = 0.0
        if not self.held:
            return []
        due = []
        held = self.held
        while held and held[0][0] <= now:
            _, frame, throttled = held.popleft()
            due.append(frame)
            if throttled:
                self.throttled_response_out()
        return due

    def drain(self) -> None:
        """Shutdown: read no new request; the connection closes once :attr:`drained`."""
        self._draining = True
