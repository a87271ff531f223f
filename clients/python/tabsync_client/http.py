"""tabsync's HTTP reads and writes (docs/design.md, "HTTP on the same port" and "Reading history";
shared/DESIGN.md, "Talking to it without a WebSocket"), with the standard library only: a
workspace's snapshot, its stored ops page by page, the state at a version or a time, recently
closed tabs, and ops written with an idempotency key. Answers are protobuf JSON, as over the
session (64-bit numbers are strings; a field at its default is left out).

Guarantees: every call has a deadline (`timeout`); a refusal raises `HttpError` with the status and
the server's message, never a bare urllib error. `write` sends one batch under one key however
often it has to try, so the batch is applied at most once (the server maps the key onto its
(client, seq) dedup); it tries again only where nothing was refused: a 503 or a 429 (after its
`Retry-After`) or an answer lost on the way.
"""
import http.client
import json
import random
import time
import uuid
import urllib.error
import urllib.parse
import urllib.request


class HttpError(Exception):
    def __init__(self, status, message):
        super().__init__(f"HTTP {status}: {message}")
        self.status, self.message = status, message


class KeyReused(HttpError):
    """422: the idempotency key was used before with another body; nothing of this body applied."""


def error_message(body):
    """The server's message out of an error body ({"error": {"message"}}), else the body itself."""
    try:
        return json.loads(body).get("error", {}).get("message", body).strip()
    except (ValueError, AttributeError):
        return body.strip()


class Http:
    def __init__(self, base, token=None, timeout=10):
        """`base`: the server's HTTP address (http://host:port; a ws:// or wss:// address is taken
        as its HTTP twin on the same port)."""
        scheme, rest = base.split("://", 1)
        scheme = {"ws": "http", "wss": "https"}.get(scheme, scheme)
        self.base = f"{scheme}://{rest.split('/', 1)[0]}"
        self.token, self.timeout = token, timeout

    def get(self, path, **query):
        """GET `path` with `query` (None values left out); the decoded JSON answer."""
        query = {k: v for k, v in query.items() if v is not None}
        url = self.base + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return json.loads(answer.read() or b"{}")
        except urllib.error.HTTPError as refused:
            raise HttpError(refused.code, error_message(refused.read().decode(errors="replace"))) from None

    def write(self, workspace, ops, key=None, deadline=60, max_wait=10):
        """POSTs `ops` (protocol JSON ops, e.g. {"add": {"tab": {...}}}) to
        /v1/workspaces/{id}/ops under `Idempotency-Key: key` (a random one when None) and returns
        the answer's `results`, one per op in order: {"version", "op"} or {"error": {"code",
        "message"}}. A 503 or 429 is tried again with the same key after its Retry-After (at most
        `max_wait` s), and so is a request whose answer was lost (connection refused, reset or
        timed out), until `deadline` s have passed; then the last failure is raised (the 503's
        HttpError, or the OSError of the lost answer). 422 raises
        `KeyReused`; any other refusal `HttpError`."""
        key = key or uuid.uuid4().hex
        body = json.dumps({"ops": list(ops)}, separators=(",", ":")).encode()
        url = f"{self.base}/v1/workspaces/{urllib.parse.quote(workspace, safe='')}/ops"
        headers = {"Content-Type": "application/json", "Accept": "application/json", "Idempotency-Key": key}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        until = time.monotonic() + deadline
        delay = 0.1
        while True:
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                    return json.loads(answer.read())["results"]
            except urllib.error.HTTPError as refused:
                message = error_message(refused.read().decode(errors="replace"))
                if refused.code == 422:
                    raise KeyReused(422, message) from None
                if refused.code not in (503, 429):
                    raise HttpError(refused.code, message) from None
                failure = HttpError(refused.code, message)
                # Retry-After is a floor: our own back-off still grows, so "0" is no busy loop.
                wait = max(retry_after(refused.headers.get("Retry-After"), delay), delay * random.uniform(0.5, 1.0))
            except (urllib.error.URLError, OSError, http.client.HTTPException) as lost:  # the answer did not come: same key again
                failure = lost
                wait = delay * random.uniform(0.5, 1.0)
            if time.monotonic() + min(wait, max_wait) > until:
                raise failure
            time.sleep(min(wait, max_wait))
            delay = min(delay * 2, max_wait)

    def snapshot(self, workspace, version=None, at=None):
        """The workspace now (a Snapshot), or at a version, or at an RFC 3339 time."""
        return self.get(f"/v1/workspaces/{urllib.parse.quote(workspace)}", version=version, at=at)

    def history(self, workspace, before=None, limit=None):
        """One page of stored ops, newest first: {"ops": [...], "next": "V"} (no "next" at the oldest)."""
        return self.get(f"/v1/workspaces/{urllib.parse.quote(workspace)}/history", before=before, limit=limit)

    def all_ops(self, workspace, page=1000):
        """Every stored op the log still holds, oldest first."""
        ops, before = [], None
        while True:
            answer = self.history(workspace, before=before, limit=page)
            ops.extend(answer.get("ops", []))
            before = answer.get("next")
            if not before:
                return list(reversed(ops))

    def closed(self, workspace, limit=None):
        """Tabs closed recently and not back, newest first."""
        return self.get(f"/v1/workspaces/{urllib.parse.quote(workspace)}/closed", limit=limit).get("closed", [])


def retry_after(value, default):
    """Seconds from a Retry-After header (a number of seconds; an HTTP date is taken as `default`)."""
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return default
