"""A reader of a workspace's change feed (docs/design.md, "The change feed"): `GET
/v1/workspaces/{id}/events`, Server-Sent Events, over the standard library.

    feed = Feed("http://127.0.0.1:7070", "team", token=viewer_token)
    for event in feed:                 # blocks; ends only when closed or refused
        if event.kind == "snapshot":   # the whole state at event.version: start over from it
            state = event.data
        else:                          # "op": the Applied of event.version
            apply(event.data)

Guarantees:
- Each event is yielded once, versions in order: after the first, an `op` is the version right
  after the one before (a `snapshot` starts again from its own version). A stream that breaks —
  the server ends it (a slow reader is cut), the connection drops, or nothing (not even the
  server's keep-alive comment) arrives within `timeout` seconds — is resumed with `Last-Event-ID`
  set to the last version yielded, so nothing is missed and nothing repeated; an event cut in the
  middle is dropped whole (the SSE rule) and comes again after the resume. When the server can
  no longer resume from there, the next event is a `snapshot`.
- A refusal (401, 403, 404, 400 …) is final: it raises `HttpError` with the server's message. A
  server that cannot be reached, or answers 502, 503 or 504 (a proxy before a node that is
  restarting), is tried again with a jittered back-off for `give_up_after` seconds since the last
  event or connection, then `FeedUnreachable` is raised.
- An `op` whose version does not follow the one before raises `FeedBroken` (the server broke its
  promise: nothing is silently skipped).
"""
import http.client
import json
import random
import socket
import time
import urllib.parse
from dataclasses import dataclass

from .http import HttpError, error_message


# Answers that say "not now" (a proxy before a node that is down or restarting): tried again.
PASSING = (502, 503, 504)


class FeedBroken(Exception):
    """An op event that is not the version right after the last one yielded."""


class FeedUnreachable(Exception):
    """No connection to the feed could be made for `give_up_after` seconds."""


@dataclass(frozen=True)
class FeedEvent:
    version: int
    kind: str  # "op" or "snapshot"
    data: dict


class Feed:
    def __init__(self, base, workspace, token=None, after=None, timeout=45, give_up_after=60,
                 backoff=(0.1, 5.0)):
        """`base`: the server's address (http://, or ws:// taken as its HTTP twin). `after`: start
        with the version after this one (None: with a snapshot of now). `timeout`: seconds of
        silence (keep-alives count) before the stream is taken as dead and resumed; keep it above
        the server's `--feed-keepalive` (15 s)."""
        scheme, rest = base.split("://", 1)
        self.tls = {"ws": "http", "wss": "https"}.get(scheme, scheme) == "https"
        self.host = rest.split("/", 1)[0]
        self.path = f"/v1/workspaces/{urllib.parse.quote(workspace, safe='')}/events"
        self.token, self.timeout, self.give_up_after = token, timeout, give_up_after
        self.backoff = backoff
        self.last = None if after is None else int(after)
        self.resumes = 0  # connections made after the first (each a resume)
        self._conn = None
        self._sock = None  # the stream's socket (http.client hands it to the response)
        self._closed = False

    def __iter__(self):
        return self._events()

    def cut(self):
        """Breaks the current connection as a network fault would (the iterator resumes by
        itself). Safe to call from another thread."""
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        """Ends the feed: the iterator stops at its next read."""
        self._closed = True
        self.cut()

    def _connect(self):
        conn_type = http.client.HTTPSConnection if self.tls else http.client.HTTPConnection
        conn = conn_type(self.host, timeout=self.timeout)
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if self.last is not None:
            headers["Last-Event-ID"] = str(self.last)
        conn.connect()
        self._sock = conn.sock
        if self._closed:
            self.cut()
        conn.request("GET", self.path, headers=headers)
        response = conn.getresponse()
        if response.status != 200:
            body = response.read().decode(errors="replace")
            self._sock = None
            conn.close()
            raise HttpError(response.status, error_message(body))
        self._conn = conn
        return response

    def _events(self):
        delay = self.backoff[0]
        alive_at = time.monotonic()  # the last time the server was heard from
        first = True
        while not self._closed:
            try:
                response = self._connect()
            except HttpError as refused:
                if refused.status not in PASSING:
                    raise
                failure = refused
            except (OSError, http.client.HTTPException) as lost:
                failure = lost
            else:
                failure = None
            if failure is not None:
                if self._closed:
                    return
                if time.monotonic() - alive_at > self.give_up_after:
                    raise FeedUnreachable(f"no connection to {self.host} for {self.give_up_after} s: {failure}")
                time.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, self.backoff[1])
                continue
            if not first:
                self.resumes += 1
            first = False
            delay = self.backoff[0]
            alive_at = time.monotonic()
            try:
                for event in self._read(response):
                    alive_at = time.monotonic()
                    yield event
            except (OSError, http.client.HTTPException):
                pass  # a cut: resume from self.last
            finally:
                conn, self._conn, self._sock = self._conn, None, None
                response.close()
                if conn is not None:
                    conn.close()
            if not self._closed:
                time.sleep(delay * random.uniform(0, 0.5))

    def _read(self, response):
        """The events of one stream (the SSE parsing rules: fields up to a blank line, comments
        skipped, a partial event at the end dropped)."""
        fields, data = {}, []
        while not self._closed:
            raw = response.fp.readline()
            if not raw.endswith(b"\n"):
                return  # the stream ended (whole or in the middle of a line)
            line = raw.decode().rstrip("\r\n")
            if line == "":
                if data and "id" in fields:
                    event = FeedEvent(int(fields["id"]), fields.get("event", "message"), json.loads("\n".join(data)))
                    self._check(event)
                    self.last = event.version
                    yield event
                fields, data = {}, []
            elif line.startswith(":"):
                continue
            else:
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "data":
                    data.append(value)
                elif name == "retry" and value.isdigit():
                    self.backoff = (int(value) / 1000, max(self.backoff[1], int(value) / 1000))
                else:
                    fields[name] = value

    def _check(self, event):
        if event.kind == "op" and self.last is not None and event.version != self.last + 1:
            raise FeedBroken(f"op {event.version} after {self.last}: the feed skipped or repeated a version")
