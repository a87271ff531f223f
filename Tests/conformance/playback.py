#!/usr/bin/env python3
"""Plays the server's side of a conformance transcript (Tests/conformance/README.md) to one real
client library over a real WebSocket, and says whether the client sent what the transcript says.

As a program, for the Swift and JS runners:

    python3 Tests/conformance/playback.py TRANSCRIPT.json

prints `HTTP <n>` (the port of its HTTP side) and `PORT <n>` (its WebSocket side) once it listens on
127.0.0.1, then `OK` (exit 0) when every server step was
played and every frame the client sent matched, or `FAIL <why>` (exit 1). The client's own steps
(`do`, `state`) are its runner's. At a `state` step the playback waits until the runner says the
client showed it (a line `STATE <index>` on stdin; `confirm(index)` in process), so no frame
after it can reach the client before the runner has looked: the two sides go in lock-step. A line
`PROGRESS` on stdin is answered `PROGRESS <what it is doing>`, for a runner's failure message.

Matching (`matches`): every field the transcript names must be in the client's frame with the same
value; the client may send more. Values are compared as protobuf JSON reads them: a default
(false, "", 0, "0", [], null) is the same as an absent field, and 64-bit integers are numbers
whether sent as strings or not. Control frames (ping, pong) and `focus` messages are not steps.

HTTP steps (an HTTP write): `request` R is matched against the next HTTP request the client sends,
on a connection of its own (method, path, the headers R names, case-insensitive, and the JSON
body as frames are); `respond` A answers it ({status, headers, body}) and closes the connection;
`drop` closes it without a byte of answer (the answer is lost).
"""
import asyncio
import json
import sys
import threading

import websockets

SUBPROTOCOL = "tabsync.v1.json"
# How long a step may wait for the client or its runner. Generous: the runner's own state checks
# fail first (with what differed); this only ends a playback nobody drives. A runner in a busy test
# process may not be scheduled for tens of seconds (Swift's cooperative pool has one thread per
# core, and other suites' tests block theirs).
STEP_TIMEOUT = 180.0
SKIPPED_KINDS = {"focus"}


def normalized(value):
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items() if not _default(v)}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value


def _default(value):
    return value is None or value is False or value == "" or value == "0" or value == 0 or value == []


def matches(expected, actual):
    """True when `actual` has every field of `expected` with the same value (after `normalized`)."""
    return _subset(normalized(expected), normalized(actual))


def _subset(expected, actual):
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and _subset(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(expected) == len(actual) and all(
            _subset(e, a) for e, a in zip(expected, actual))
    return expected == actual


class Mismatch(Exception):
    pass


class Playback:
    """Serves one transcript on 127.0.0.1 (port 0: a free one) until `run()` returns or raises
    `Mismatch`."""

    def __init__(self, transcript, port=0):
        self.transcript = transcript
        self.port = port
        self.connections = asyncio.Queue()
        self.requests = asyncio.Queue()  # HTTP connections, one request each
        self.server = None
        self.http_server = None
        self.http_port = 0
        self.progress = "not started"  # the step being played, for a runner's failure message
        self.confirmed = -1  # the last `state` step the runner saw the client show
        self.confirmation = asyncio.Event()

    async def start(self):
        async def handler(ws):
            closed = asyncio.get_running_loop().create_future()
            await self.connections.put((ws, closed))
            await closed  # the connection lives until the playback cuts it or ends

        self.server = await websockets.serve(
            handler, "127.0.0.1", self.port, subprotocols=[SUBPROTOCOL], ping_interval=None)
        self.port = self.server.sockets[0].getsockname()[1]

        async def http_handler(reader, writer):
            await self.requests.put((reader, writer))

        self.http_server = await asyncio.start_server(http_handler, "127.0.0.1", 0)
        self.http_port = self.http_server.sockets[0].getsockname()[1]
        return self

    def confirm(self, index):
        """The runner saw the client show the `state` step `index`."""
        self.confirmed = max(self.confirmed, index)
        self.confirmation.set()

    async def run(self):
        ws, closed, accepted = None, None, 0
        http = None  # the (reader, writer) of the HTTP request being played
        try:
            for index, step in enumerate(self.transcript["steps"]):
                where = f"step {index} ({json.dumps(step)[:160]})"
                self.progress = f"playing {where}"
                if "accept" in step:
                    try:
                        ws, closed = await asyncio.wait_for(self.connections.get(), STEP_TIMEOUT)
                    except asyncio.TimeoutError:
                        raise Mismatch(f"{where}: the client did not connect")
                    accepted += 1
                    if ws.subprotocol != SUBPROTOCOL:
                        raise Mismatch(f"{where}: the client asked for {ws.subprotocol!r}, not {SUBPROTOCOL}")
                elif "recv" in step:
                    expected = step["recv"]
                    kind = next(iter(expected))
                    while True:
                        try:
                            raw = await asyncio.wait_for(ws.recv(), STEP_TIMEOUT)
                        except asyncio.TimeoutError:
                            raise Mismatch(f"{where}: the client sent nothing")
                        except websockets.ConnectionClosed as e:
                            raise Mismatch(f"{where}: the client closed the connection ({e})")
                        got = json.loads(raw)
                        self.progress = f"playing {where}; the client's last frame: {raw[:300]}"
                        if set(got) & SKIPPED_KINDS:
                            continue
                        break
                    if not matches(expected, got):
                        raise Mismatch(f"{where}: the client sent {json.dumps(got)}")
                elif "send" in step:
                    await ws.send(json.dumps(step["send"]))
                elif "state" in step:
                    deadline = asyncio.get_running_loop().time() + STEP_TIMEOUT
                    while self.confirmed < index:
                        self.confirmation.clear()
                        left = deadline - asyncio.get_running_loop().time()
                        try:
                            await asyncio.wait_for(self.confirmation.wait(), max(left, 0))
                        except asyncio.TimeoutError:
                            raise Mismatch(f"{where}: the runner did not see the client show it")
                elif "request" in step:
                    try:
                        http = await asyncio.wait_for(self.requests.get(), STEP_TIMEOUT)
                        got = await asyncio.wait_for(read_request(http[0]), STEP_TIMEOUT)
                    except asyncio.TimeoutError:
                        raise Mismatch(f"{where}: the client sent no HTTP request")
                    self.progress = f"playing {where}; the client's request: {json.dumps(got)[:300]}"
                    if not matches(step["request"], got):
                        raise Mismatch(f"{where}: the client sent {json.dumps(got)}")
                elif "respond" in step:
                    await respond(http[1], step["respond"])
                    http = None
                elif "drop" in step:
                    http[1].close()
                    http = None
                elif "cut" in step:
                    await ws.close(1001, "cut by the transcript")
                    closed.set_result(None)
                    ws = None
                if not self.connections.empty() and "accept" not in step and ws is not None:
                    raise Mismatch(f"{where}: the client opened another connection while one was open")
            self.progress = "played every step"
        except Mismatch as e:
            self.progress = f"failed: {e}"
            raise
        finally:
            if closed is not None and not closed.done():
                closed.set_result(None)

    async def close(self):
        self.server.close()
        await self.server.wait_closed()
        self.http_server.close()


async def read_request(reader):
    """One HTTP/1.1 request: {method, path, headers (names in lower case), body (JSON, or the text)}."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    method, path, _ = head[0].split(" ", 2)
    headers = {}
    for line in head[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    raw = await reader.readexactly(int(headers.get("content-length", "0")))
    try:
        body = json.loads(raw)
    except ValueError:
        body = raw.decode(errors="replace")
    return {"method": method, "path": path, "headers": headers, "body": body}


async def respond(writer, answer):
    """Writes `answer` ({status, headers, body}) as an HTTP/1.1 answer and closes the connection."""
    body = (json.dumps(answer["body"]) + "\n").encode()
    head = f"HTTP/1.1 {answer['status']} {REASONS.get(answer['status'], 'Answer')}\r\n"
    head += "Content-Type: application/json\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in answer.get("headers", {}).items())
    head += f"Content-Length: {len(body)}\r\n\r\n"
    writer.write(head.encode() + body)
    await writer.drain()
    writer.close()


REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 422: "Unprocessable Content", 429: "Too Many Requests",
           503: "Service Unavailable"}


async def main(path):
    with open(path) as f:
        transcript = json.load(f)
    playback = await Playback(transcript).start()
    print(f"HTTP {playback.http_port}", flush=True)
    print(f"PORT {playback.port}", flush=True)
    loop = asyncio.get_running_loop()

    def confirmations():
        for line in sys.stdin:
            if line.startswith("STATE "):
                loop.call_soon_threadsafe(playback.confirm, int(line.split()[1]))
            elif line.strip() == "PROGRESS":
                print(f"PROGRESS {playback.progress}", flush=True)

    threading.Thread(target=confirmations, daemon=True).start()
    try:
        await playback.run()
        print("OK", flush=True)
        return 0
    except Mismatch as e:
        print(f"FAIL {e}", flush=True)
        return 1
    finally:
        await playback.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
