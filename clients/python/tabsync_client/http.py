"""tabsync's HTTP reads (docs/design.md, "HTTP on the same port" and "Reading history"), with the
standard library only: a workspace's snapshot, its stored ops page by page, the state at a version
or a time, and recently closed tabs. Answers are protobuf JSON, as over the session (64-bit numbers
are strings; a field at its default is left out).

Guarantees: every call has a deadline (`timeout`); a refusal raises `HttpError` with the status and
the server's message, never a bare urllib error.
"""
import json
import urllib.error
import urllib.parse
import urllib.request


class HttpError(Exception):
    def __init__(self, status, message):
        super().__init__(f"HTTP {status}: {message}")
        self.status, self.message = status, message


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
            body = refused.read().decode(errors="replace")
            try:
                body = json.loads(body).get("error", {}).get("message", body)
            except (ValueError, AttributeError):
                pass
            raise HttpError(refused.code, body.strip()) from None

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
