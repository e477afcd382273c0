"""A relay in front of the broker that counts the Produce frames reaching it (bench/churn.py runs it as its own
process): ``python bench/counting_relay.py LISTEN_PORT BROKER_PORT COUNT_FILE``; the count is written to COUNT_FILE
every 0.2 s."""

import asyncio
import struct
import sys

listen, target, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
produces = 0


async def upstream(reader, writer):
    global produces
    buf = bytearray()
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            buf += data
            while len(buf) >= 8:
                size, api_key = struct.unpack_from(">ih", buf)
                if len(buf) < size + 4:
                    break
                produces += api_key == 0
                del buf[: size + 4]
    except OSError:
        pass
    writer.close()


async def downstream(reader, writer):
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
    except OSError:
        pass
    writer.close()


async def handle(reader, writer):
    try:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
    except OSError:
        writer.close()
        return
    await asyncio.gather(upstream(reader, up_writer), downstream(up_reader, writer))


async def report():
    while True:
        with open(out, "w") as f:
            f.write(str(produces))
        await asyncio.sleep(0.2)


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", listen, backlog=4096)
    async with server:
        await report()


asyncio.run(main())
