"""A proxy on 127.0.0.1 that makes an HTTP server's answers late, for the chaos soak
(``optfarm.farm.bench.chaos``) and the tests of what a late answer does to tracking: the answer
to the ``hold_nth`` request whose path starts with ``hold_path`` is held ``hold_s`` seconds
(e.g. one MLflow ``runs/create`` answered after the client's request timeout), and every answer
is delayed ``delay_s`` seconds while that is set (a slow server).

It forwards bytes as they come; it reads only enough of HTTP/1.1 to know which request an
answer belongs to (the request line, and ``Content-Length`` to find the next request on a
kept-alive connection). A connection whose request body it cannot measure (chunked) is
forwarded as is from then on. The request was sent on at once: only its answer is late, as
when a busy server carries a request out and answers after the client gave up.
"""

from __future__ import annotations

import asyncio
import threading
import time

__all__ = ["LateAnswers"]

_CHUNK = 65536


class LateAnswers:
    """The proxy in front of ``127.0.0.1:target_port`` (the module docstring), served by an
    asyncio loop in a daemon thread from ``start`` (its port) to ``stop``. ``requests``
    counts the requests seen by path; ``held`` those held."""

    def __init__(
        self, target_port: int, hold_path: str | None = None, hold_nth: int = 1, hold_s: float = 0
    ):
        self.target_port = target_port
        self.hold_path, self.hold_nth, self.hold_s = hold_path, hold_nth, hold_s
        self.delay_s = 0.0
        self.requests: dict[str, int] = {}
        self.held = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server = None

    def start(self) -> int:
        """Listen on a free port of 127.0.0.1; that port."""
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        ).result(30)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def stop(self) -> None:
        async def close():
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)

    async def _serve(self, client_r, client_w) -> None:
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_w.close()
            return
        due = [0.0]  # when the answer to the request in hand may be passed on
        tasks = [
            asyncio.ensure_future(self._requests(client_r, server_w, due)),
            asyncio.ensure_future(self._answers(server_r, client_w, due)),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            for w in (client_w, server_w):
                w.close()

    async def _requests(self, reader, writer, due: list[float]) -> None:
        """Client -> server: each request's head read (its path, its body's length), then
        passed on whole; the answer's due time set from its path."""
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as e:
                if e.partial:
                    writer.write(e.partial)
                return
            except asyncio.LimitOverrunError:
                return await _pipe(reader, writer)  # not HTTP as this reads it
            path, length = _request_of(head)
            due[0] = time.monotonic() + self.delay_s + self._hold(path)
            writer.write(head)
            if length is None:
                return await _pipe(reader, writer)
            while length > 0:
                data = await reader.read(min(length, _CHUNK))
                if not data:
                    return
                writer.write(data)
                length -= len(data)
            await writer.drain()

    def _hold(self, path: str) -> float:
        """The seconds the answer to a request of ``path`` is held."""
        self.requests[path] = self.requests.get(path, 0) + 1
        if self.hold_path is None or not path.startswith(self.hold_path):
            return 0.0
        seen = sum(n for p, n in self.requests.items() if p.startswith(self.hold_path))
        if seen != self.hold_nth:
            return 0.0
        self.held += 1
        return self.hold_s

    async def _answers(self, reader, writer, due: list[float]) -> None:
        """Server -> client, each piece passed on once its request's answer is due."""
        while data := await reader.read(_CHUNK):
            wait = due[0] - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()


def _request_of(head: bytes) -> tuple[str, int | None]:
    """(path, body length) of a request head; the length None when it is not given
    (chunked)."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    path = parts[1] if len(parts) > 1 else ""
    length: int | None = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
        elif name.strip().lower() == "transfer-encoding":
            length = None
    return path, length


async def _pipe(reader, writer) -> None:
    while data := await reader.read(_CHUNK):
        writer.write(data)
        await writer.drain()
