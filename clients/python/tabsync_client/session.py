"""A tabsync session for Python programs (subprotocol tabsync.v1.json over `websockets`), with the
rules the Swift `Session` and `web/tabsync-client.js` keep (docs/design.md: "Submit, seqs and
dedup", "Transient refusals are retried", "Resume and epoch", "Close codes"):

- `submit(op)` returns a future: the op's `Applied`, or `Refused` for a permanent refusal. An op is
  settled only by its own answer. After every `Welcome` each pending op is sent again with its seq
  (the server repeats a stored answer; `Welcome.lastSeq` alone settles nothing), and only `Rejected
  ANSWER_GONE` (the server no longer holds the answer) ends one without it, as `AnswerGone`.
- A transient refusal (`UNAVAILABLE`, `RATE_LIMITED`) is no answer: the op is held and sent again as
  a new op with a new seq after a back-off with full jitter, or at the next `Welcome`.
- Ops go in order, paced under `Welcome.limits` (the smaller of `maxOpsPerSecond` and
  `maxOpsPerSecondPerUser`): a token bucket waits here rather than be refused there.
- Resume with `lastVersion` and `epoch`; a version gap resumes, an op that does not fit or another
  epoch asks for a snapshot. A snapshot under the same epoch below a version already seen is a store
  brought back from a copy: a new history, taken whole.
- Reconnects back off with full jitter (random in [0, min(cap, base * 2^attempt)]), so clients
  cut at once do not return in lock-step; 4307 reconnects at once. 4401, 4408 and 4410 end the
  session (`Ended`): the server said not to come back on our own.

`on_event(kind, **fields)` is told everything that happens, for logs and checkers: connect,
welcome (with the connection's local port and wall time), submit (each time an op goes, with
`resubmit` when it goes again with its seq after a Welcome), applied (every op seen), ack (this
client's own), reject, retry (a held op under a new seq, with its `first`), answer_gone, resync,
presence, error, disconnect, ended. scripts/nemesis writes them as its clients' histories.
"""
import asyncio
import itertools
import json
import random
import time
import uuid

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from .replica import Diverged, Replica

SUBPROTOCOL = "tabsync.v1.json"
TRANSIENT = frozenset({"UNAVAILABLE", "RATE_LIMITED"})
ENDING_CLOSES = {4401: "unauthorized", 4408: "closed by an operator", 4410: "the workspace was deleted"}


class Refused(Exception):
    """A permanent refusal: the server's `Rejected` (or a history `error`) code and message."""

    def __init__(self, code, message, seq=None):
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.seq = code, message, seq


class AnswerGone(Exception):
    """The server no longer holds this op's answer; its effect, if any, is in the state."""


class Ended(Exception):
    """The server closed the session with a code that says not to reconnect on our own."""

    def __init__(self, code, reason):
        super().__init__(f"{code} {reason}")
        self.code, self.reason = code, reason


class _Resync(Exception):
    """Close this connection and resume at once."""


class Backoff:
    """Full jitter: attempt n waits a random time in [0, min(cap, base * 2^n)]."""

    def __init__(self, base=0.1, cap=5.0, rng=None):
        self.base, self.cap, self.rng = base, cap, rng or random.Random()

    def delay(self, attempt):
        return self.rng.uniform(0, min(self.cap, self.base * (2 ** min(attempt, 30))))


class _Pacer:
    """A token bucket under the server's `rate` ops per second (0: unpaced), with margin as the JS
    client's (docs/design.md, "Limits and defaults"): refilled at 90% of the rate, a burst of half
    of it, so the server's bucket keeps a reserve for ops the network delivers bunched."""
    SHARE = 0.9

    def __init__(self):
        self.rate, self.tokens, self.at = 0, 0.0, time.monotonic()

    @property
    def burst(self):
        return float(max(1, self.rate // 2))

    def limit(self, rate):
        if rate != self.rate:
            self.rate, self.tokens, self.at = rate, float(max(1, rate // 2)), time.monotonic()

    async def take(self):
        while self.rate:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate * self.SHARE)
            self.at = now
            if self.tokens >= 1:
                self.tokens -= 1
                return
            await asyncio.sleep((1 - self.tokens) / (self.rate * self.SHARE))


class _Entry:
    """One submitted op: its seq while sent and unanswered (None before it goes, or once refused for
    a reason that passes), the confirmed version when it first went (its `baseVersion`: the version
    any key in it was computed against, sent with every seq it gets), and the future its answer
    settles."""
    __slots__ = ("op", "future", "seq", "first", "tries", "base")

    def __init__(self, op, future):
        self.op, self.future, self.seq, self.first, self.tries, self.base = op, future, None, None, 0, None


class Session:
    def __init__(self, url, workspace, *, client_id=None, name=None, token=None, on_event=None,
                 backoff=None, retry_backoff=None, open_timeout=10, connect_options=None):
        """`connect_options`: more keyword arguments for `websockets`' `connect` (e.g. its
        `ping_interval`); `backoff`, `retry_backoff`: `Backoff`s (a seeded one replays)."""
        self.url = url
        self.workspace = workspace
        self.client_id = client_id or f"py-{uuid.uuid4().hex[:16]}"
        self.name = name or self.client_id
        self.token = token
        self.state = Replica()
        self.on_event = on_event or (lambda kind, **fields: None)
        self.backoff = backoff or Backoff()
        self.retry_backoff = retry_backoff or Backoff(base=0.2, cap=5.0)
        self.open_timeout = open_timeout
        self.connect_options = connect_options or {}
        self.next_seq = 1
        self.outbox = []         # _Entry, in the order submitted: sent (a seq) or not yet
        self.held_refusals = 0   # transient refusals in a row: the retry back-off's attempt
        self._hold_until = 0     # monotonic time before which no unsent op goes (a held op waits)
        self.ended = None        # Ended, once the server said not to come back
        self.welcomes = 0
        self.peers = {}          # session id -> Peer (protobuf JSON) of the workspace's sessions, ours too
        self.others = 0          # sessions the peer list does not name (Presence.othersCount)
        self._want_snapshot = False
        self._seen = {}          # epoch -> highest version seen under it
        self._conn = None
        self._ready = asyncio.Event()
        self._changed = asyncio.Condition()
        self._pacer = _Pacer()
        self._queries = {}       # history query id -> future
        self._query_ids = itertools.count(1)
        self._sending = asyncio.Lock()
        self._task = None
        self._waking = False     # a task sleeps until the hold is over, then pumps
        self._closing = False

    # ------------------------------------------------------------------ lifetime

    async def start(self, timeout=None):
        """Connects (in the background, reconnecting as needed) and waits for the first Welcome."""
        self._task = asyncio.get_running_loop().create_task(self._run())
        await self.wait_until(lambda s: s.welcomes > 0, timeout or self.open_timeout)
        return self

    async def close(self):
        self._closing = True
        if self._conn is not None:
            await self._conn.close(1000, "done")
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        for entry in self.outbox:
            if not entry.future.done():
                entry.future.cancel()

    async def wait_until(self, predicate, timeout):
        """Waits until `predicate(self)` holds (checked after every change), or raises TimeoutError;
        raises `Ended` if the session ends first."""
        async def waiting():
            async with self._changed:
                while not predicate(self):
                    if self.ended:
                        raise self.ended
                    await self._changed.wait()
        await asyncio.wait_for(waiting(), timeout)

    async def _notify(self):
        async with self._changed:
            self._changed.notify_all()

    # ------------------------------------------------------------------ ops

    def submit(self, op):
        """Queues an op (protobuf JSON, e.g. {"add": {"tab": {...}}}); the future gets its Applied."""
        future = asyncio.get_running_loop().create_future()
        self.outbox.append(_Entry(op, future))
        self._kick()
        return future

    async def history(self, query, timeout=10):
        """A HistoryQuery over the session (e.g. {"ops": {"limit": 20}}, {"closed": 10},
        {"version": "3"}); returns the HistoryAnswer, or raises `Refused` with its error."""
        query_id = next(self._query_ids)
        future = asyncio.get_running_loop().create_future()
        self._queries[query_id] = future
        try:
            async def ask():
                while True:
                    await self._ready.wait()
                    try:
                        await self._conn.send(json.dumps({"history": {"id": query_id, **query}}))
                        return await future
                    except (ConnectionClosed, AttributeError):
                        await asyncio.sleep(0.05)  # dropped before it went: ask the next connection
            answer = await asyncio.wait_for(ask(), timeout)
        finally:
            self._queries.pop(query_id, None)
        if "error" in answer:
            raise Refused(answer["error"].get("code", ""), answer["error"].get("message", ""))
        return answer

    def _kick(self):
        """Sends what the outbox may send now, in the background."""
        if self._ready.is_set():
            asyncio.get_running_loop().create_task(self._pump_quietly())

    async def _pump(self):
        """Numbers and sends the outbox's unsent ops in order (paced); stops at a held op until its
        back-off is over, so ops go in the order they were submitted. Call with `_sending` held."""
        while (entry := next((e for e in self.outbox if e.seq is None), None)) is not None:
            if self._conn is None:
                return  # the next Welcome sends it
            if time.monotonic() < self._hold_until:
                self._wake_after_hold()
                return
            await self._pacer.take()
            if entry.seq is not None or entry not in self.outbox or self._conn is None:
                continue
            entry.seq = self.next_seq
            self.next_seq += 1
            if entry.tries:
                self.on_event("retry", seq=entry.seq, first=entry.first)
            else:
                entry.first = entry.seq
                entry.base = self.state.version
            entry.tries += 1
            await self._send(entry, resubmit=False)

    async def _send(self, entry, resubmit):
        self.on_event("submit", seq=entry.seq, op=entry.op, resubmit=resubmit)
        submit = {"seq": str(entry.seq), "baseVersion": str(entry.base), "op": entry.op}
        await self._conn.send(json.dumps({"submit": submit}, separators=(",", ":")))

    async def _pump_quietly(self):
        try:
            async with self._sending:
                await self._pump()
        except ConnectionClosed:
            pass  # the next Welcome sends them

    def _wake_after_hold(self):
        """Makes sure the outbox is pumped again once the hold is over (one sleeper at a time)."""
        if not self._waking:
            self._waking = True
            asyncio.get_running_loop().create_task(self._wake())

    async def _wake(self):
        try:
            while (left := self._hold_until - time.monotonic()) > 0:  # a later refusal may extend it
                await asyncio.sleep(left)
        finally:
            self._waking = False
        await self._pump_quietly()

    def _entry(self, seq):
        return next((e for e in self.outbox if e.seq == seq), None)

    def _settle(self, entry, result=None, error=None):
        self.outbox.remove(entry)
        if not entry.future.done():
            if error is not None:
                entry.future.set_exception(error)
            else:
                entry.future.set_result(result)

    # ------------------------------------------------------------------ answers

    def _applied(self, applied, via):
        version = int(applied.get("version", 0))
        seq = int(applied.get("seq", 0))
        self.on_event("applied", version=version, client=applied.get("clientId", ""), seq=seq,
                      op=applied.get("op", {}), via=via)
        entry = self._entry(seq) if applied.get("clientId") == self.client_id else None
        if entry is not None:
            self.held_refusals = 0
            self.on_event("ack", seq=seq, version=version, via=via)
            self._settle(entry, result=applied)
        if version <= self.state.version:
            return
        if version != self.state.version + 1:
            self.on_event("resync", reason=f"version gap: expected {self.state.version + 1}, got {version}")
            self._want_snapshot = via == "missed"
            raise _Resync("version gap")
        try:
            self.state.apply(applied)
        except Diverged as problem:
            self.on_event("resync", reason=str(problem))
            self._want_snapshot = True
            raise _Resync("diverged") from None
        self._seen[self.state.epoch] = max(self._seen.get(self.state.epoch, 0), self.state.version)

    def _rejected(self, rejected):
        seq = int(rejected.get("seq", 0))
        code, message = rejected.get("code", ""), rejected.get("message", "")
        entry = self._entry(seq)
        if entry is None:
            return
        if code == "ANSWER_GONE":
            self.on_event("answer_gone", seq=seq)
            self._settle(entry, error=AnswerGone(f"seq {seq}"))
            return
        transient = code in TRANSIENT
        self.on_event("reject", seq=seq, code=code, message=message, held=transient)
        if not transient:
            self._settle(entry, error=Refused(code, message, seq))
            return
        # Held: sent again as a new op (a new seq) after the back-off or at the next Welcome; the
        # ops after it wait behind it.
        entry.seq = None
        self.held_refusals += 1
        delay = 1.0 if code == "RATE_LIMITED" else self.retry_backoff.delay(self.held_refusals - 1)
        self._hold_until = max(self._hold_until, time.monotonic() + delay)
        self._wake_after_hold()

    @property
    def ready(self):
        """True while a connection is welcomed and its outbox sent again."""
        return self._ready.is_set()

    def _welcome(self, welcome, local_port=None, wall=None):
        recovered = bool(welcome.get("recovered", False))
        epoch = welcome.get("epoch", "")
        limits = welcome.get("limits", {})
        rates = [int(limits.get(k, 0)) for k in ("maxOpsPerSecond", "maxOpsPerSecondPerUser")]
        self._pacer.limit(min([r for r in rates if r] or [0]))
        if recovered and epoch != self.state.epoch:
            self.on_event("resync", reason=f"resumed under epoch {epoch}, had {self.state.epoch}")
            self._want_snapshot = True
            raise _Resync("epoch")
        if not recovered:
            snapshot = welcome.get("snapshot", {})
            new_history = (snapshot.get("epoch") or epoch) != self.state.epoch or \
                int(snapshot.get("version", 0)) < self._seen.get(epoch, 0)
            self.state.load(snapshot, epoch)
            if new_history:
                self._seen = {}
            self._seen[self.state.epoch] = max(self._seen.get(self.state.epoch, 0), self.state.version)
        self.welcomes += 1
        self.on_event("welcome", recovered=recovered, version=self.state.version, epoch=epoch,
                      lastSeq=int(welcome.get("lastSeq", 0)), missed=len(welcome.get("missed", [])),
                      session=welcome.get("sessionId", ""), port=local_port, wall=wall)
        for applied in welcome.get("missed", []):
            self._applied(applied, "missed")
        self._want_snapshot = False
        self.next_seq = max(self.next_seq, int(welcome.get("lastSeq", 0)) + 1)

    def _presence(self, presence):
        """A whole peer list, or a delta (peers joined or changed, session ids left)."""
        if not presence.get("delta"):
            self.peers = {}
        for peer in presence.get("peers", []):
            self.peers[peer.get("sessionId", "")] = peer
        for session_id in presence.get("left", []):
            self.peers.pop(session_id, None)
        self.others = int(presence.get("othersCount", 0))
        self.on_event("presence", peers=len(self.peers), others=self.others)

    def _received(self, message):
        if "applied" in message:
            self._applied(message["applied"], "live")
        elif "rejected" in message:
            self._rejected(message["rejected"])
        elif "history" in message:
            future = self._queries.get(message["history"].get("id", 0))
            if future is not None and not future.done():
                future.set_result(message["history"])
        elif "presence" in message:
            self._presence(message["presence"])
        elif "error" in message:
            self.on_event("error", code=message["error"].get("code", ""), message=message["error"].get("message", ""))
        elif "welcome" in message:
            raise _Resync("a second welcome")

    # ------------------------------------------------------------------ the connection

    def _hello(self):
        hello = {"workspace": self.workspace, "clientId": self.client_id, "clientName": self.name}
        if self.token:
            hello["token"] = self.token
        if not self._want_snapshot and self.state.version > 0:
            hello["lastVersion"] = str(self.state.version)
            hello["epoch"] = self.state.epoch
        return json.dumps({"hello": hello})

    async def _connection(self):
        """One connection: Hello, Welcome, the outbox again, then answers until it closes. Returns
        (code, reason, at_once)."""
        options = dict(open_timeout=self.open_timeout, close_timeout=2, max_size=1 << 22, compression=None, proxy=None)
        options.update(self.connect_options)
        async with connect(self.url, subprotocols=[SUBPROTOCOL], **options) as conn:
            local_port = conn.transport.get_extra_info("sockname")[1]
            wall = time.time()
            await conn.send(self._hello())
            try:
                while True:
                    message = json.loads(await asyncio.wait_for(conn.recv(), self.open_timeout))
                    if "welcome" in message:
                        break
                    self._received(message)  # an Error before the close
                self.peers, self.others = {}, 0
                self._welcome(message["welcome"], local_port, wall)
                self._conn = conn
                async with self._sending:
                    # Every sent, unanswered op again with its seq (the server repeats a stored
                    # answer), then the unsent and held ones numbered anew, in order; `ready` once
                    # the outbox is through (no await between the last look and the flag).
                    for entry in sorted((e for e in self.outbox if e.seq is not None), key=lambda e: e.seq):
                        await self._pacer.take()
                        await self._send(entry, resubmit=True)
                    self._hold_until = 0
                    await self._pump()
                    self._ready.set()
                await self._notify()
                async for raw in conn:
                    self._received(json.loads(raw))
                    await self._notify()
            except _Resync as why:
                await conn.close(1000, f"client: {why}")
                return 1000, str(why), True
            finally:
                self._ready.clear()
                self._conn = None
            return conn.close_code or 1006, conn.close_reason or "", False

    async def _run(self):
        attempt = 0
        while not self._closing:
            self.on_event("connect", attempt=attempt)
            welcomes = self.welcomes
            try:
                code, reason, at_once = await self._connection()
            except ConnectionClosed as closed:
                code, reason, at_once = (closed.rcvd.code, closed.rcvd.reason, False) if closed.rcvd else (1006, str(closed), False)
            except InvalidStatus as refused:
                code, reason, at_once = 0, f"HTTP {refused.response.status_code}", False
            except (OSError, asyncio.TimeoutError, InvalidHandshake, InvalidURI, EOFError) as problem:
                code, reason, at_once = 1006, f"{type(problem).__name__}: {problem}", False
            self.on_event("disconnect", code=code, reason=reason[:200])
            if self._closing:
                break
            if code in ENDING_CLOSES:
                self.ended = Ended(code, reason or ENDING_CLOSES[code])
                self.on_event("ended", code=code, reason=reason)
                for entry in self.outbox:
                    if not entry.future.done():
                        entry.future.set_exception(self.ended)
                await self._notify()
                break
            if self.welcomes > welcomes:
                attempt = 0  # the back-off counts failed connects only
            if at_once or code == 4307:
                continue
            await asyncio.sleep(self.backoff.delay(attempt))
            attempt = min(attempt + 1, 30)
