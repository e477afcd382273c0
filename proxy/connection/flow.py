"""One client connection's flow control: every reason either socket is not read, in one pure object.

No transport, no event loop: events come in as method calls, time is passed in (one monotonic clock, in
nanoseconds, the same one the request and response paths read), and the state comes out as plain values the socket
code applies after every event (h11's connection object; Kafka's ``KafkaChannel`` mute states). The rules:

- **Back-pressure** stops reading at once, even in the middle of a frame: the broker socket's write buffer is full
  (stop reading the client), or the client socket's is (stop reading the broker).
- **Quota and bound reasons take effect only at a request frame boundary** (Kafka mutes a channel only after a
  complete request): a mute until a time, a throttled request whose response is not out yet, a request waiting
  for the proxy's own lookup before it is decided (KIP-599 partition counts), the in-flight bound reached
  (requests awaiting answers, or response bytes the client has not taken), and draining at shutdown. In the middle
  of a frame without back-pressure the client is always read, so a throttled request always reaches the broker
  whole and every reason has an exit. At the bound of requests alone the socket stays open to reads until a frame
  comes past it (read :data:`THROTTLED_READ_BYTES` at most, then held back, as below): a client at the bound usually
  waits for an answer, and pausing its socket and resuming it at each answer cost two system calls per request.
- Bytes read past a boundary where a quota reason holds are **held back** (:mod:`proxy.connection.read_ahead`)
  and replayed, frame by frame, once the reasons are gone; reads are kept small meanwhile, so this stays small.
- **One throttle lifecycle**: a throttle decided with a request (:meth:`Flow.throttle_request`) marks its entry
  throttled (reading stops at the next boundary until its response is out) or, with no response (``acks=0``),
  mutes at once; the response goes out at once with ``throttle_time_ms`` and the connection is muted after it
  (:meth:`Flow.throttled_response`). Every version alike, as Kafka's broker since 2.0 (KIP-219): a response is
  never held, so a client whose request timeout is shorter than the throttle never resends an appended request.
- **Timeouts**: the flow keeps when the client last sent, since when it has taken no response, and when reading the
  broker last resumed (:mod:`proxy.connection.timeouts`), and says which bound a connection is past.
- **Read sizing**: once bytes were held back past a paused boundary, reads stay small
  (:data:`THROTTLED_READ_BYTES`) until the connection is unhindered again with nothing held back.
- **Held requests** (:mod:`proxy.connection.holds`): reading stops at the next boundary until each is decided or
  abandoned, but for small reads (held back as above) that see the client's close before their time is up.
- **A gone client**: after ``max_inflight`` frames unheard from the client, or at a pause with frames unheard, the
  core asks whether it is still there (:attr:`Flow.unheard`); gone, none of the rest is forwarded: it drains.
- **One deadline**: :meth:`Flow.next_deadline` is the earliest of a mute's end, a hold's end and the next timeout
  check; the socket code keeps one timer for it. The mute state has a name (:attr:`Flow.mute_state`), for logs.

An illegal transition (a reason lifted that was never set, a counter below zero) raises :class:`FlowError`.
"""

from __future__ import annotations

from collections.abc import Callable

from proxy.connection.holds import HeldRequest, Holds
from proxy.connection.inflight import InFlight, InFlightQueue
from proxy.connection.mute_state import mute_state
from proxy.connection.read_ahead import ReadAhead
from proxy.connection.timeouts import Timeouts
from quota.primitives.decision import Throttle, longest

# Once a connection has been paused by a quota, its reads are at most this big, so what is read past a paused
# boundary (and held back until the pause ends) stays small; Kafka holds at most the request being received.
THROTTLED_READ_BYTES = 64 * 1024


class FlowError(RuntimeError):
    """An event that cannot happen in the flow's current state: a bug in the caller, never a client's doing."""


class Flow:
    __slots__ = (
        "inflight",
        "max_inflight",
        "_mid_frame",
        "_broker_full",
        "_responses_full",
        "_muted_until",
        "_throttled",
        "_deciding",
        "_holds",
        "_draining",
        "_read_ahead",
        "_requests",
        "_small_reads",
        "timeouts",
        "unheard",
        "left",
        "_held",
        "unhindered",
        "full_reads",
    )

    def __init__(self, max_inflight: int, response_timeout: int = 0, idle_timeout: int = 0) -> None:
        if max_inflight < 1:
            raise ValueError(f"max_inflight must be at least 1, got {max_inflight}")
        self.inflight = InFlightQueue()  # requests read and not yet answered, in order
        self._requests = self.inflight.entries  # its entries, read for their number on the hot path
        self.max_inflight = max_inflight
        self._mid_frame = False  # a request frame has started and not ended
        self._broker_full = False  # back-pressure: the broker socket's write buffer is full
        self._responses_full = False  # back-pressure: the client socket's write buffer is full (responses not taken)
        self._muted_until = 0  # quota mute: read no new request before this time (ns; 0: not muted)
        self._throttled = 0  # requests throttled when read whose response is not out yet
        self._deciding = 0  # requests waiting for the proxy's own lookup or work, or held, before they are decided
        self._holds = Holds()  # of which held until a time (proxy.connection.holds), the client watched
        self._draining = False
        self._read_ahead = ReadAhead()  # request bytes read past a paused boundary (proxy.connection.read_ahead)
        self._small_reads = False  # bytes were held back past a paused boundary: keep reads small
        self.timeouts = Timeouts(response_timeout, idle_timeout)  # the idle and response timeouts' state
        # frames started since the client was last heard from (a read) or found there: at ``max_inflight`` the core
        # asks if it is still there, so a client gone with many requests pipelined costs the broker that many at most
        self.unheard = 0
        self.left = False  # the client was found gone before its requests were all forwarded: none more are
        self._held, self.unhindered, self.full_reads = False, True, True  # kept by _changed() for the hot path

    # -- what the socket code applies ---------------------------------------------------------------------------

    def _changed(self) -> None:
        """A reason was set or lifted, or bytes held back or replayed (called by every method that does; none on the
        hot path): :attr:`_held`, a reason that stops reading at the next boundary holds (all but the in-flight
        bound, which stops only a frame that comes past it: module doc); :attr:`unhindered`, nothing holds either side
        and nothing waits (the bound of requests aside); :attr:`full_reads`, not held and reads not kept small."""
        held = bool(self._muted_until or self._throttled or self._deciding or self._responses_full or self._draining)
        self._held, self.full_reads = held, not (held or self._small_reads)
        self.unhindered = not (held or self._broker_full or self._read_ahead.data is not None)

    def _paused_at_boundary(self) -> bool:
        """A reason that stops the next request frame from starting holds (the one pause condition)."""
        return self._held or len(self._requests) >= self.max_inflight

    paused_at_boundary = property(_paused_at_boundary)

    def read_size(self, available: int, frame_remaining: int) -> int:
        """How much of a read buffer of ``available`` bytes the next client read may fill, ``frame_remaining``
        bytes of the current request frame still to come (0 at a boundary)."""
        if frame_remaining:
            if self._held:
                return min(available, frame_remaining)  # read to the end of this frame, not past it
        elif (self._deciding and self._holds) or len(self._requests) >= self.max_inflight:
            # a held client watched (holds count among deciding), or at the bound: read on, little (what comes waits)
            return min(available, THROTTLED_READ_BYTES)
        if self._small_reads:
            if self._read_ahead.data is None and not self._held:
                self._small_reads, self.full_reads = False, True  # the pause is over, none held back: full reads
                return available
            return min(available, THROTTLED_READ_BYTES)
        return available

    @property
    def reading_client(self) -> bool:
        if self._broker_full:
            return False
        if self._mid_frame:
            return True
        return self._read_ahead.data is None and (bool(self._holds) or not self._held)

    @property
    def reading_broker(self) -> bool:
        return not self._responses_full

    @property
    def at_bound(self) -> bool:
        """No new request starts for the in-flight bound (requests or unsent response bytes), not for a quota."""
        return not self._mid_frame and (self._responses_full or len(self._requests) >= self.max_inflight)

    @property
    def mid_frame(self) -> bool:
        return self._mid_frame

    @property
    def draining(self) -> bool:
        return self._draining

    @property
    def drained(self) -> bool:
        """Draining, at a boundary, and every request answered and sent: the connection may close."""
        return self._draining and not self._mid_frame and not self.inflight.awaiting_response()

    def next_deadline(self) -> int | None:
        """The earliest time something changes by itself (a mute ends, a hold ends, the timeouts are checked), or
        None: the one deadline the socket code keeps a timer for."""
        deadline = self._muted_until
        timeouts = self.timeouts.check_at
        if timeouts and (not deadline or timeouts < deadline):
            deadline = timeouts
        held = self._holds.earliest()
        if held and (not deadline or held < deadline):
            deadline = held
        return deadline or None

    @property
    def mute_state(self) -> str:
        """Why reading stops, by name (Kafka's ``ChannelMuteState``; :func:`proxy.connection.mute_state.mute_state`)."""
        return mute_state(
            muted=bool(self._muted_until),
            response_pending=bool(self._throttled),
            held=bool(self._holds),
            deciding=self._deciding > len(self._holds),
            inflight_bound=len(self._requests) >= self.max_inflight,
            client_full=self._responses_full,
            broker_full=self._broker_full,
            draining=self._draining,
        )

    # -- request frames ------------------------------------------------------------------------------------------

    def start_frame(self) -> bool:
        """Asked at a request frame boundary before its first byte is taken: False while a reason pauses reading
        there; True means the frame has started (reading goes on, back-pressure aside, until it ends)."""
        if self._mid_frame:
            raise FlowError("a request frame started inside another")
        if self._held or len(self._requests) >= self.max_inflight:  # _paused_at_boundary, inline
            return False
        self._mid_frame = True
        self.unheard += 1
        return True

    def client_present(self) -> None:
        """The client is still connected: ``max_inflight`` more frames before the next look."""
        self.unheard = 0

    def client_left(self) -> None:
        """The client is gone: no request not yet started is forwarded (held-back bytes are dropped), nothing more
        is read, and the connection closes once what is in flight is answered (:attr:`drained`)."""
        if self._mid_frame:
            raise FlowError("the client was found gone in the middle of a request frame")
        self.left = True
        self._read_ahead.drop()
        self._draining = True
        self._changed()

    def frame_ended(self) -> None:
        if not self._mid_frame:
            raise FlowError("a request frame ended that never started")
        self._mid_frame = False

    def hold_back(self, data: bytes | bytearray | memoryview) -> None:
        """Request bytes read past a boundary where reading paused; replayed by :meth:`take_read_ahead`."""
        if self._mid_frame:
            raise FlowError("read-ahead held back in the middle of a frame")
        if not len(data):
            return
        if self._read_ahead.data is not None:
            raise FlowError("read-ahead held back while earlier read-ahead is still held")
        self._read_ahead.keep(data)
        self._small_reads = True
        self._changed()

    @property
    def read_ahead_bytes(self) -> int:
        return self._read_ahead.size

    def read_ahead_due(self) -> bool:
        """Held-back bytes may be replayed now (nothing holds reading at the boundary, no back-pressure)."""
        return self._read_ahead.data is not None and not self._broker_full and not self.paused_at_boundary

    def take_read_ahead(self) -> memoryview:
        """The held-back bytes, to feed again; give back what was not consumed with :meth:`consumed_read_ahead`."""
        if self._read_ahead.data is None:
            raise FlowError("no read-ahead is held")
        return self._read_ahead.view()

    def consumed_read_ahead(self, nbytes: int) -> None:
        """``nbytes`` of :meth:`take_read_ahead`'s view were consumed; the rest stays held (no copy)."""
        if self._read_ahead.data is None or nbytes > self._read_ahead.size:
            raise FlowError("more read-ahead consumed than held")
        self._read_ahead.consumed(nbytes)
        self._changed()

    # -- back-pressure -----------------------------------------------------------------------------------------

    def broker_backpressure(self, on: bool) -> None:
        if on == self._broker_full:
            raise FlowError(f"broker back-pressure {'set' if on else 'lifted'} twice")
        self._broker_full = on
        self._changed()

    def client_backpressure(self, on: bool, now: int) -> None:
        if on == self._responses_full:
            raise FlowError(f"client back-pressure {'set' if on else 'lifted'} twice")
        self._responses_full = on
        self.timeouts.full_since = now if on else 0
        self._changed()

    # -- timeouts (proxy.connection.timeouts) ------------------------------------------------------------------------

    def client_read(self, now: int) -> None:
        """The client sent bytes (the idle timeout starts anew; it was heard from)."""
        self.timeouts.last_read = now
        self.unheard = 0

    def broker_read_resumed(self, now: int) -> None:
        """The socket code resumed reading the broker: time the proxy kept it unread does not count against it."""
        self.timeouts.broker_resumed = now

    def check_timeouts(self, now: int, waiting_since: int | None) -> str | None:
        """The check time has come: the bound past, or None and the next check set (:meth:`Timeouts.check`)."""
        if not self.timeouts.response_timeout:
            raise FlowError("timeouts checked on a flow without timeouts")
        return self.timeouts.check(now, waiting_since, self.reading_broker)

    # -- quota outcomes ----------------------------------------------------------------------------------------

    def mute(self, now: int, mute_ms: int) -> None:
        """Read no new request for ``mute_ms`` from ``now``; a longer mute already in place is kept."""
        if mute_ms < 0:
            raise FlowError(f"negative mute {mute_ms} ms")
        if mute_ms:
            self._muted_until = max(self._muted_until, now + mute_ms * 1_000_000)
            self._changed()

    def throttle_request(self, entry: InFlight | None, throttle: Throttle, now: int, *, pause: bool = True) -> int:
        """A throttle decided with a request (at its header, or on its body). It combines with one decided before
        (the longest wins) and goes with the response. The first throttle of a request that expects a response marks
        it throttled: read nothing more until its response is out (``pause`` False for an answer of the proxy's
        own, which only mutes once it goes out). A request with no response (``acks=0``; ``entry`` None when
        the broker is known not to answer those) has nothing to carry it: the mute applies now. Returns the mute
        applied now, in ms (0 when the response carries the throttle)."""
        if entry is None or not entry.expects_response:
            if entry is not None:
                entry.throttle = throttle if entry.throttle is None else longest(entry.throttle, throttle)
            self.mute(now, throttle.mute_ms)
            return throttle.mute_ms
        if entry.throttle is None:
            if pause:
                entry.throttled = True
                self._throttled += 1
                self._changed()
            entry.throttle = throttle
        else:
            entry.throttle = longest(entry.throttle, throttle)
        return 0

    def throttled_response(self, entry: InFlight, now: int) -> None:
        """The response to a throttled request goes out now (written by the caller, or already sent: an answer of
        the proxy's own) and the connection is muted for the throttle, whatever the request's version: Kafka's
        broker sends the response at once and mutes the channel until the throttle ends (a client before KIP-219
        does not back off by itself; the mute holds its next request)."""
        throttle = entry.throttle
        if throttle is None:
            raise FlowError(f"a throttled response for request {entry.header.correlation_id} with no throttle")
        self.mute(now, throttle.mute_ms)
        self._response_out(entry)

    def _response_out(self, entry: InFlight | None) -> None:
        if entry is None or not entry.throttled:
            return
        if not self._throttled:
            raise FlowError("a throttled response went out with no throttled request in flight")
        entry.throttled = False
        self._throttled -= 1
        self._changed()

    def request_deciding(self) -> None:
        """A request waits for the answer to the proxy's own lookup (or work) before it is decided: read nothing
        more until it is (its outcome keeps its place in the response order)."""
        self._deciding += 1
        self._changed()

    def request_decided(self) -> None:
        if self._deciding <= len(self._holds):
            raise FlowError("a request was decided that was not waiting for a lookup")
        self._deciding -= 1
        self._changed()

    def hold(self, now: int, delay_ms: int, due: Callable[[], None], abandon: Callable[[], None]) -> None:
        """A request is kept in the proxy for ``delay_ms`` from ``now``: read nothing more (but small reads, to see the
        client's close) until :meth:`holds_due` hands back its ``due`` to decide it, or :meth:`abandon_holds` its."""
        if delay_ms <= 0:
            raise FlowError(f"a request held for {delay_ms} ms")
        self._holds.add(now + delay_ms * 1_000_000, due, abandon)
        self._deciding += 1
        self._changed()

    def holds_due(self, now: int) -> list[HeldRequest]:
        """The holds whose time has come, in the order they were made; they leave the flow."""
        due = self._holds.due(now)
        if due:
            self._deciding -= len(due)
            self._changed()
        return due

    @property
    def held(self) -> int:
        """Requests held until a time (:meth:`hold`)."""
        return len(self._holds)

    def waits_ms(self, now: int) -> tuple[int, int]:
        """How long the quota mute and the longest held request still last from ``now`` (ms, 0: none). Reads only."""
        held = self._holds.latest()
        return max(0, (self._muted_until - now) // 1_000_000), max(0, (held - now) // 1_000_000)

    def abandon_holds(self) -> list[HeldRequest]:
        """The client left: every hold leaves the flow, never decided (the caller abandons them)."""
        holds = self._holds.abandon()
        if holds:
            self._deciding -= len(holds)
            self._changed()
        return holds

    # -- time ----------------------------------------------------------------------------------------------------

    def tick(self, now: int) -> None:
        """Time has passed: end an expired mute."""
        if self._muted_until and self._muted_until <= now:
            self._muted_until = 0
            self._changed()

    def drain(self) -> None:
        """Shutdown: read no new request; the connection closes once :attr:`drained`."""
        self._draining = True
        self._changed()
