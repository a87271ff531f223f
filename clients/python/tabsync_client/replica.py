"""The confirmed state of one workspace, as the server's Applied ops and snapshots make it
(docs/design.md, "Model" and "Operations"): tabs by id with their position keys, the active tab, the
version and the epoch. It applies results, never rules: every Applied carries the final key of each
tab it placed, so a replica needs no ordering logic of its own.

Guarantees: `tabs()` is in display order (keys compared bytewise, as the server orders them);
`apply` raises `Diverged` for an op that does not fit (a tab it names is missing), leaving the
replica unchanged, so the caller can ask for a snapshot instead of guessing.
"""
import copy

UPDATE_FIELDS = ("title", "url", "icon", "badge", "locked")


class Diverged(Exception):
    """An Applied op does not fit the replica: take a snapshot (resume without lastVersion)."""


class Replica:
    def __init__(self):
        self.version = 0
        self.epoch = ""
        self.active = ""
        self.editable = True
        self._tabs = {}

    def load(self, snapshot, epoch=""):
        """Takes a Snapshot (protobuf JSON) whole."""
        self.version = int(snapshot.get("version", 0))
        self.epoch = snapshot.get("epoch") or epoch
        self.active = snapshot.get("activeTabId", "")
        self.editable = snapshot.get("editable", True)
        self._tabs = {t["id"]: dict(t) for t in snapshot.get("tabs", [])}

    def tabs(self):
        """The tabs in display order (by key, bytewise)."""
        return sorted(self._tabs.values(), key=lambda t: t.get("key", "").encode())

    def tab(self, tab_id):
        return self._tabs.get(tab_id)

    def apply(self, applied):
        """Applies one Applied (protobuf JSON) at version + 1; returns the ids it removed."""
        tabs = copy.deepcopy(self._tabs)
        removed = []
        op = applied.get("op", {})
        try:
            if "add" in op or "open" in op:
                tab = (op.get("add") or op.get("open"))["tab"]
                tabs[tab["id"]] = dict(tab)
            elif "move" in op:
                tabs[op["move"]["tabId"]]["key"] = op["move"]["place"]["key"]
            elif "remove" in op:
                del tabs[op["remove"]["tabId"]]
                removed.append(op["remove"]["tabId"])
            elif "update" in op:
                update = op["update"]
                tab = tabs[update["tabId"]]
                for field in UPDATE_FIELDS:
                    if field in update:
                        tab[field] = update[field]
            elif "rekey" in op:
                for k in op["rekey"].get("keys", []):
                    tabs[k["tabId"]]["key"] = k["key"]
            elif "replace" in op or "restore" in op:
                listed = op["replace"].get("tabs", []) if "replace" in op else op["restore"].get("state", {}).get("tabs", [])
                new = {t["id"]: dict(t) for t in listed}
                removed = [t for t in tabs if t not in new]
                tabs = new
            elif "activate" in op or "setEditable" in op:
                pass
            else:
                raise Diverged(f"an op this client does not know: {sorted(op)}")
        except KeyError as missing:
            raise Diverged(f"version {applied.get('version')}: no tab {missing}") from None
        if "setEditable" in op:
            self.editable = bool(op["setEditable"].get("editable", False))
        self._tabs = tabs
        self.version = int(applied.get("version", self.version + 1))
        self.active = applied.get("activeTabId", "")
        return removed
