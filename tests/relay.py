"""A TCP relay that records who connects through it: it stands where a broker's advertised address points, so a
test can tell whether any client went to the broker directly instead of through the proxy."""

from __future__ import annotations

import asyncio
import threading


class RecordingRelay:
    def __init__(self, listen_host: str, target: tuple[str, int]) -> None:
        self.listen_host = listen_host
        self.target = target
        self.peers: list[tuple[str, int]] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="relay", daemon=True)
        self._server = None

    def start(self) -> "RecordingRelay":
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, self.listen_host, 0), self._loop).result(5)
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
