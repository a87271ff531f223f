"""The change feed on several nodes (docs/design.md, "The change feed", "Resume"): two real
tabsync-servers on one PostgreSQL. A reader that saw versions on one node and resumes on a node
that is behind the store (it held the workspace before the other node wrote, and heard nothing of
those commits) never goes back: the node reads the store first and continues after the reader's
version with no gap; a reader past the store itself gets a snapshot of the store's version, not of
the node's older one.

The node is made to stay behind without a race: its registration as a holder is removed (as an
expired one would be), so the other node's commits notify nobody, and its poll of stored versions
is set to ten minutes."""
import asyncio
import secrets
import subprocess

from test_admin import mint
from test_feed import Feed
from test_webhooks_nodes import PgNode, store, write_on  # noqa: F401 (store: the fixture)


def first_events(feed, count):
    """The first `count` events of a stream, as (id, event)."""
    seen = []
    for event_id, name, _ in feed.events():
        seen.append((int(event_id), name))
        if len(seen) == count:
            break
    return seen


def test_a_reader_resuming_on_a_node_behind_the_store_never_goes_back(tmp_path, store):  # noqa: F811
    key = tmp_path / "team.key"
    secret = secrets.token_hex(32)
    key.write_text(secret + "\n")
    slow = ("--store-poll-interval", "600s")
    one = PgNode(tmp_path, "node1", store, key, *slow)
    two = PgNode(tmp_path, "node2", store, key, *slow)
    sessions = []
    feeds = []
    try:
        reader = mint(secret, "reader", role="viewer")
        # Node 1 holds "lag" at version 3 (its session stays, so it stays loaded).
        sessions.append(asyncio.run(write_on(one, secret, "lag", 0, 3, "c1")))
        # Its registration goes (as an expired one would): node 2's commits notify nobody.
        subprocess.run(["psql", "-q", store, "-c", "DELETE FROM tabsync_holders WHERE workspace = 'lag'"],
                       check=True, stdout=subprocess.DEVNULL)
        sessions.append(asyncio.run(write_on(two, secret, "lag", 3, 5, "c2")))  # versions 4..8

        # A reader that saw version 5 (on node 2) resumes on node 1, which is at 3.
        feed = Feed(one, "lag", reader, last_event_id=5)
        feeds.append(feed)
        assert feed.response.status == 200
        assert first_events(feed, 3) == [(6, "op"), (7, "op"), (8, "op")]

        # Past the store itself (a store brought back from a copy): a snapshot of the store's
        # version, which node 1 reads first (10, not the 8 it holds).
        sessions.append(asyncio.run(write_on(two, secret, "lag", 8, 2, "c3")))  # versions 9, 10
        past = Feed(one, "lag", reader, last_event_id=50)
        feeds.append(past)
        assert first_events(past, 1) == [(10, "snapshot")]
    finally:
        for feed in feeds:
            feed.close()
        for s in sessions:
            try:
                asyncio.run(s.ws.close())
            except Exception:
                pass
        one.stop()
        two.stop()
