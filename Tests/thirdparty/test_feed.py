"""The change feed as a stranger reads it (docs/design.md, "The change feed"): `GET
/v1/workspaces/{id}/events` over Python's http.client with a Server-Sent Events parser of this file,
PyJWT tokens, ops made over Python `websockets`. The stream starts with a snapshot, then carries
every durable op once with its version as the event id; a reader that resumes (`Last-Event-ID`,
or `?after=`) misses nothing and sees nothing twice, even cut a hundred times while ops are being
made; a silent stream gets comment lines; a token is needed as for reads, and a revoked token's
stream ends; a deleted workspace's stream ends."""
import asyncio
import http.client
import json
import random
import threading
import time

from test_admin import Node, Session, call, mint
from test_history import submit

import pytest


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path, "--feed-keepalive", "0.3", "--max-ops-per-second", "10000")
    yield n
    n.stop()


class Feed:
    """One SSE stream: `events()` yields (id, event, data) as the spec's parser dispatches them, and
    comment lines are counted."""

    def __init__(self, node, workspace, token=None, last_event_id=None, query=""):
        self.port = int(node.http.rsplit(":", 1)[1])
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        headers = {"Accept": "text/event-stream"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        self.conn.request("GET", f"/v1/workspaces/{workspace}/events{query}", headers=headers)
        self.response = self.conn.getresponse()
        self.comments = 0

    def events(self):
        fields = {}
        while True:
            raw = self.response.fp.readline()
            if not raw:
                return  # the server ended the stream
            line = raw.decode().rstrip("\n")
            if line == "":
                if "data" in fields:
                    yield fields.get("id"), fields.get("event", "message"), json.loads(fields["data"])
                fields = {}
            elif line.startswith(":"):
                self.comments += 1
            else:
                name, _, value = line.partition(":")
                fields[name] = value[1:] if value.startswith(" ") else value

    def close(self):
        self.conn.close()


def make_ops(node, workspace, count, client="writer"):
    """`count` adds then moves from one session, in the background; returns the thread."""
    def run():
        async def main():
            s = await Session(node.ws, workspace, mint(node.secret, client), client=client).open()
            for seq in range(1, count + 1):
                op = {"add": {"tab": {"id": f"{client}-{seq}", "title": f"tab {seq}"}}} if seq % 3 else \
                     {"move": {"tabId": f"{client}-{seq - 1}", "place": {"index": 0}}}
                answer = await submit(s, seq, op)
                assert "applied" in answer, answer
            await s.ws.close()
        asyncio.run(main())
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_snapshot_then_every_op_and_a_resume_misses_nothing(node):
    viewer = mint(node.secret, "vic", role="viewer")
    make_ops(node, "team", 6).join()
    feed = Feed(node, "team", viewer)
    assert feed.response.status == 200
    assert feed.response.getheader("Content-Type").startswith("text/event-stream")
    assert feed.response.getheader("Cache-Control") == "no-store"
    events = feed.events()
    first = next(events)
    assert first[0] == "6" and first[1] == "snapshot" and first[2]["version"] == "6"
    assert len(first[2]["tabs"]) == 4
    writer = make_ops(node, "team", 3, client="second")
    seen = [next(events) for _ in range(3)]
    writer.join()
    assert [(e[0], e[1]) for e in seen] == [("7", "op"), ("8", "op"), ("9", "op")]
    assert seen[0][2]["op"]["add"]["tab"]["id"] == "second-1" and seen[0][2]["version"] == "7"
    feed.close()

    # Resume after 7, by Last-Event-ID and by ?after=: 8 and 9, nothing else.
    for kwargs in ({"last_event_id": 7}, {"query": "?after=7"}):
        again = Feed(node, "team", viewer, **kwargs)
        got = again.events()
        assert [next(got)[0] for _ in range(2)] == ["8", "9"]
        again.close()
    # A version the workspace does not have yet (a store brought back from a copy): a snapshot.
    ahead = Feed(node, "team", viewer, last_event_id=99)
    assert next(ahead.events())[1] == "snapshot"
    ahead.close()
    bad = Feed(node, "team", viewer, query="?after=seven")
    assert bad.response.status == 400


def test_comment_lines_keep_a_silent_stream_open(node):
    feed = Feed(node, "quiet", mint(node.secret, "vic", role="viewer"))
    events = feed.events()
    assert next(events)[1] == "snapshot"
    # Read lines until two comments came (the server sends one every 0.3 s here); no event comes.
    deadline = time.monotonic() + 10
    while feed.comments < 2:
        assert time.monotonic() < deadline, "no keep-alive comment"
        line = feed.response.fp.readline().decode()
        if line.startswith(":"):
            feed.comments += 1
        else:
            assert line == "\n" or line == "", f"unexpected line in a silent stream: {line!r}"
    feed.close()


def test_a_reader_cut_a_hundred_times_sees_every_version_once_in_order(node):
    viewer = mint(node.secret, "vic", role="viewer")
    writers = [make_ops(node, "busy", 150, client=f"w{i}") for i in range(2)]
    rng = random.Random(4242)
    versions = []
    cuts = 0
    last = 0
    feed = Feed(node, "busy", viewer, query="?after=0")
    while True:
        for event_id, kind, data in feed.events():
            assert kind == "op", f"resuming from {last} gave a {kind}"
            versions.append(int(event_id))
            last = int(event_id)
            if last == 300 or rng.random() < 0.15:
                break  # cut here, after a whole event (or all are in)
        feed.close()
        if last == 300:
            break
        cuts += 1
        feed = Feed(node, "busy", viewer, last_event_id=last)
    for w in writers:
        w.join()
    assert versions == list(range(1, 301)), "every version once, in order"
    assert cuts >= 30, f"only {cuts} cuts"


def test_a_token_is_needed_and_a_revoked_tokens_stream_ends(node):
    assert Feed(node, "team").response.status == 401
    other = mint(node.secret, "eve", ws="other-*", role="viewer")
    assert Feed(node, "team", other).response.status == 401
    token = mint(node.secret, "vic", role="viewer", jti="feed-1")
    feed = Feed(node, "team", token)
    events = feed.events()
    assert next(events)[1] == "snapshot"
    status, _ = call(node.http, "POST", "/v1/admin/revocations", node.admin, {"jti": "feed-1"})
    assert status == 201
    assert list(events) == [], "the stream ends without another event"
    assert Feed(node, "team", token).response.status == 401


def test_a_deleted_workspaces_stream_ends(node):
    make_ops(node, "doomed", 2).join()
    feed = Feed(node, "doomed", mint(node.secret, "vic", role="viewer"))
    events = feed.events()
    assert next(events)[1] == "snapshot"
    status, _ = call(node.http, "DELETE", "/v1/admin/workspaces/doomed", node.admin)
    assert status == 200
    assert list(events) == []
