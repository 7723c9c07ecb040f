"""A plain TCP server for TFO hosts: listens on 0.0.0.0 and :: (ports from the command line)
with TCP_FASTOPEN, so a namespace answers on every address it owns (and on local-route
ranges). Replies to anything with a tiny HTTP response and closes; survives resets and
SYN floods (large backlog; the manager sets somaxconn and disables SYN cookies).

Usage: python -m testbed.tfo_server --port 80 --port 443 [--no-tfo]
"""
from __future__ import annotations

import argparse
import asyncio
import signal
import socket

TFO_QUEUE = 4096
BACKLOG = 65535


def _listener(family: int, port: int, tfo: bool) -> socket.socket:
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    if tfo:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_FASTOPEN, TFO_QUEUE)
    s.bind(("0.0.0.0" if family == socket.AF_INET else "::", port))
    s.listen(BACKLOG)
    s.setblocking(False)
    return s


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        try:
            await asyncio.wait_for(reader.read(2048), timeout=2.0)
        except asyncio.TimeoutError:
            pass
        local = writer.get_extra_info("sockname")[0]
        body = f"tfo-testbed {local}\n".encode()
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)
        await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def _main(ports: list[int], tfo: bool) -> None:
    servers = []
    for port in ports:
        for fam in (socket.AF_INET, socket.AF_INET6):
            servers.append(await asyncio.start_server(_handle, sock=_listener(fam, port, tfo), backlog=BACKLOG))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for s in servers:
        s.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, action="append", default=[])
    ap.add_argument("--no-tfo", action="store_true")
    a = ap.parse_args()
    asyncio.run(_main(a.port or [80, 443], not a.no_tfo))


if __name__ == "__main__":
    main()
