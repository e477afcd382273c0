"""A TCP relay that records who connects through it: it stands where a broker's advertised address points, so a
test can tell whether any client went to the broker directly instead of through the proxy; and one in front of the
broker that reads which producer ids reach it (:class:`BrokerSideRecorder`)."""

from __future__ import annotations

import asyncio
import struct
import threading
import time

from proxy.codec.apis import INIT_PRODUCER_ID, PRODUCE
from proxy.codec.header import parse_request_header
from proxy.codec.messages import decode_request
from proxy.codec.records import iter_batches


class RecordingRelay:
    def __init__(self, listen_host: str, target: tuple[str, int]) -> None:
        self.listen_host = listen_host
        self.target = target
        self.peers: list[tuple[str, int]] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="relay", daemon=True)
        self._server = None

    def start(self) -> RecordingRelay:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, self.listen_host, 0), self._loop
        ).result(5)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _handle(self, reader, writer) -> None:
        self.peers.append(writer.get_extra_info("peername")[:2])
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def stop(self) -> None:
        async def close():
            self._server.close()
            # the connections' pipes end here, on a running loop (left pending, they were closed by the garbage
            # collector after the loop: "Event loop is closed" warnings)
            pending = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy ``src`` to ``dst`` until either side ends; then close ``dst``."""
    try:
        while data := await src.read(1 << 16):
            dst.write(data)
            await dst.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        dst.close()


_SIZE = struct.Struct(">i")


class BrokerSideRecorder(RecordingRelay):
    """A relay in front of the broker (tests.relay's, started and stopped as it is) that reads every request the
    proxy sends it: (monotonic time, producer id) of each Produce batch's producer, how many InitProducerId
    requests came, and how many of each API.

    ``init_together``: the first InitProducerId requests are kept until that many have come (at most
    ``INIT_TOGETHER_S``, below clients' 30 s request timeout), then passed on at once, so that clients a loaded
    machine started seconds apart (JVMs) send their first Produce within moments of each other, as producers
    restarted together do."""

    INIT_TOGETHER_S = 20.0

    def __init__(self, target: tuple[str, int], init_together: int = 0) -> None:
        super().__init__("127.0.0.1", target)
        self.produced: list[tuple[float, int]] = []
        self.init_producer_ids = 0
        self.requests: dict[int, int] = {}  # API key -> requests of it the broker received
        self._lock = threading.Lock()
        self._init_together = init_together
        self._all_inits: asyncio.Event | None = None  # made in the relay's loop

    async def _handle(self, reader, writer) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._requests(reader, up_writer), pipe(up_reader, writer))

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                frame = _SIZE.pack(size) + await reader.readexactly(size)
                if self._note(frame) == INIT_PRODUCER_ID and self._init_together:
                    await self._together()
                writer.write(frame)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _together(self) -> None:
        """Keep an InitProducerId until ``init_together`` of them came (those after pass at once)."""
        if self._all_inits is None:
            self._all_inits = asyncio.Event()
        if self.init_producer_ids >= self._init_together:
            self._all_inits.set()
        try:
            await asyncio.wait_for(self._all_inits.wait(), self.INIT_TOGETHER_S)
        except TimeoutError:  # fewer came: they go on, and the test's own count says so
            self._all_inits.set()

    def _note(self, frame: bytes) -> int:
        """Records ``frame``; returns its API key."""
        header = parse_request_header(frame, len(frame))
        now = time.monotonic()
        with self._lock:
            self.requests[header.api_key] = self.requests.get(header.api_key, 0) + 1
        if header.api_key == INIT_PRODUCER_ID:
            with self._lock:
                self.init_producer_ids += 1
        if header.api_key != PRODUCE:
            return header.api_key
        msg = decode_request(PRODUCE, header.api_version, memoryview(frame)[header.header_length :])
        pids = {
            batch.producer_id
            for topic in msg.topic_data
            for part in topic.partition_data
            if part.records
            for batch in iter_batches(part.records)
        }
        with self._lock:
            self.produced.extend((now, pid) for pid in pids if pid >= 0)
        return header.api_key

    def first_seen(self) -> dict[int, float]:
        """When the broker first saw each producer id."""
        seen: dict[int, float] = {}
        with self._lock:
            for at, pid in self.produced:
                seen.setdefault(pid, at)
        return seen

    def produces_of(self, pid: int) -> int:
        with self._lock:
            return sum(1 for _, p in self.produced if p == pid)


def most_in_a_window(times: list[float], window_s: float) -> int:
    """The most of ``times`` (a recorder's, in seconds) inside any window of ``window_s`` starting at one of them."""
    times = sorted(times)
    return max(sum(1 for t in times if start <= t < start + window_s) for start in times)
