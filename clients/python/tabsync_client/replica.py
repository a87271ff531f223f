"""The confirmed state of one workspace, as the server's Applied ops and snapshots make it
(docs/design.md, "Model", "Operations" and "Tab groups"): tabs by id with their position keys and
groups, the groups, the active tab, the version and the epoch. It applies results, never rules:
every Applied carries the final key and group of each tab it placed, so a replica needs no ordering
or placement logic of its own.

Guarantees: `tabs()` is in display order, each tab with its `group` ("" for none) (keys compared bytewise, as the server orders them);
`groups()` lists exactly the groups some tab names, in the display order of their tabs (a group
whose last tab left is gone); `apply` raises `Diverged` for an op that does not fit (a tab or group
it names is missing), leaving the replica unchanged, so the caller can ask for a snapshot instead of
guessing.
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
        self._groups = {}

    def load(self, snapshot, epoch=""):
        """Takes a Snapshot (protobuf JSON) whole."""
        self.version = int(snapshot.get("version", 0))
        self.epoch = snapshot.get("epoch") or epoch
        self.active = snapshot.get("activeTabId", "")
        self.editable = snapshot.get("editable", True)
        self._tabs = {t["id"]: _tab(t) for t in snapshot.get("tabs", [])}
        self._groups = {g["id"]: _group(g) for g in snapshot.get("groups", [])}

    def tabs(self):
        """The tabs in display order (by key, bytewise)."""
        return sorted(self._tabs.values(), key=lambda t: t.get("key", "").encode())

    def tab(self, tab_id):
        return self._tabs.get(tab_id)

    def groups(self):
        """The groups (`{id, title, color}`) in the display order of their tabs."""
        return _settled(self.tabs(), self._groups)

    def group(self, group_id):
        return self._groups.get(group_id)

    def apply(self, applied):
        """Applies one Applied (protobuf JSON) at version + 1; returns the ids it removed."""
        tabs = copy.deepcopy(self._tabs)
        groups = copy.deepcopy(self._groups)
        removed = []
        op = applied.get("op", {})
        try:
            if "add" in op or "open" in op:
                tab = (op.get("add") or op.get("open"))["tab"]
                _need_group(groups, tab.get("group", ""))
                tabs[tab["id"]] = _tab(tab)
            elif "move" in op:
                move = op["move"]
                _need_group(groups, move.get("group", ""))
                tabs[move["tabId"]]["key"] = move["place"]["key"]
                tabs[move["tabId"]]["group"] = move.get("group", "")
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
                whole = op["replace"] if "replace" in op else op["restore"].get("state", {})
                new = {t["id"]: _tab(t) for t in whole.get("tabs", [])}
                removed = [t for t in tabs if t not in new]
                tabs = new
                groups = {g["id"]: _group(g) for g in whole.get("groups", [])}
            elif "group" in op or "ungroup" in op:
                change = op.get("group") or op["ungroup"]
                ids, keys = change.get("tabIds", []), change.get("keys", [])
                if len(ids) != len(keys):
                    raise Diverged(f"version {applied.get('version')}: a group op without one key per tab")
                for tab_id, key in zip(ids, keys):
                    tabs[tab_id]["key"] = key
                    tabs[tab_id]["group"] = change["groupId"] if "group" in op else ""
                if "group" in op:
                    old = groups.get(change["groupId"], {})
                    groups[change["groupId"]] = _group({
                        "id": change["groupId"], "title": change.get("title", old.get("title", "")),
                        "color": change.get("color", old.get("color", "grey"))})
            elif "updateGroup" in op:
                update = op["updateGroup"]
                group = groups[update["groupId"]]
                for field in ("title", "color"):
                    if field in update:
                        group[field] = update[field]
            elif "activate" in op or "setEditable" in op:
                pass
            else:
                raise Diverged(f"an op this client does not know: {sorted(op)}")
        except KeyError as missing:
            raise Diverged(f"version {applied.get('version')}: no tab or group {missing}") from None
        if "setEditable" in op:
            self.editable = bool(op["setEditable"].get("editable", False))
        self._tabs = tabs
        # A group whose last tab left (removed, moved away, ungrouped) is gone.
        named = {t.get("group", "") for t in tabs.values()}
        self._groups = {gid: g for gid, g in groups.items() if gid in named}
        self.version = int(applied.get("version", self.version + 1))
        self.active = applied.get("activeTabId", "")
        return removed


def _tab(t):
    """A tab as the replica keeps it: its fields as sent, and `group` always there ("" for none)."""
    tab = dict(t)
    tab.setdefault("group", "")
    return tab


def _group(g):
    """A group with protobuf JSON's left-out fields filled in."""
    return {"id": g.get("id", ""), "title": g.get("title", ""), "color": g.get("color") or "grey"}


def _need_group(groups, group_id):
    """A group an Applied places a tab in must exist ("" names none)."""
    if group_id and group_id not in groups:
        raise KeyError(f"group {group_id}")


def _settled(tabs, groups):
    """The groups some tab names, in the display order of their tabs."""
    ordered = []
    for tab in tabs:
        gid = tab.get("group", "")
        if gid and gid in groups and groups[gid] not in ordered:
            ordered.append(groups[gid])
    return ordered
