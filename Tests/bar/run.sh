#!/usr/bin/env bash
# Drives `tabsync bar` the way a person would: tmux runs it in a pane of fixed size against a real
# server (`tabsync-server --port 0 --memory`); send-keys types, capture-pane reads the screen, and
# each screen is compared with its golden capture in Tests/bar/goldens/. GENERATE=1 rewrites them.
# Also checks the one-shot commands' output and exit codes.
# Usage: Tests/bar/run.sh   (after `swift build`; BIN=path/to/bin overrides .build/debug)
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib.sh

BIN=${BIN:-.build/debug}
TABSYNC=$PWD/$BIN/tabsync
SERVER=$PWD/$BIN/tabsync-server
GOLDENS=$PWD/Tests/bar/goldens
[ -x "$TABSYNC" ] && [ -x "$SERVER" ] || fatal "build first: $TABSYNC and $SERVER are missing"
command -v tmux >/dev/null || fatal "tmux is missing (scripts/lib.sh ensure_packages installs it)"

WORK=$(mktemp -d)
SOCKET=tabsync-bar-test-$$
SERVER_PID=
FAILURES=0
cleanup() {
    tmux -L "$SOCKET" kill-server 2>/dev/null || true
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# wait_until SECONDS CMD...: runs CMD every 50 ms until it succeeds, for at most SECONDS (then a
# last try); the status of the last try. Every wait in this script is one of these: a condition
# with a deadline, never a sleep for a guessed time.
wait_until() {
    local limit=$1 i
    shift
    for i in $(seq $((limit * 20))); do
        "$@" && return 0
        sleep 0.05
    done
    "$@"
}

# --- the server: port 0, wait for its real port (time-boxed) ---
"$SERVER" --port 0 --memory --log-level error >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
URL=$(listening_url "$WORK/server.out" "$SERVER_PID" 10) || fatal "the server did not start: $(cat "$WORK/server.err")"
log "server at $URL"

export XDG_CONFIG_HOME=$WORK/config
WS=bar-test

# ts CMD ARGS...: a one-shot command from another client, on the test workspace.
ts() {
    local cmd=$1
    shift
    "$TABSYNC" "$cmd" --server "$URL" --workspace "$WS" --client-id script --name script "$@"
}

fail() {
    printf 'FAIL: %s\n' "$*" >&2
    FAILURES=$((FAILURES + 1))
}

# start_bar COLS ROWS ARGS...: the bar in a shell in a pane (BAR_ENV: VAR=value words for its
# environment); after it exits the shell prints its
# exit status and whether the terminal modes came back (icanon, echo), then waits.
start_bar() {
    local cols=$1 rows=$2
    shift 2
    cat >"$WORK/bar.sh" <<SH
#!/bin/sh
env ${BAR_ENV:-} "$TABSYNC" bar --server "$URL" --workspace "$WS" --client-id bar1 --name alice $*
status=\$?
printf '\nEXIT=%s\n' "\$status"
stty -a | tr ' ;' '\n\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\n' ' '
printf '\n'
exec sleep 600
SH
    chmod +x "$WORK/bar.sh"
    # After kill-session of the last session the tmux server exits; a new-session that reaches it
    # while it does fails ("server exited unexpectedly"): try again until one starts a new server.
    wait_until 10 tmux -L "$SOCKET" -f /dev/null new-session -d -s bar -x "$cols" -y "$rows" "$WORK/bar.sh" \
        || fatal "tmux did not start the bar's session"
    tmux -L "$SOCKET" set-option -g status off >/dev/null
}

keys() { tmux -L "$SOCKET" send-keys -t bar "$@"; }
# type TEXT: literal text.
typetext() { tmux -L "$SOCKET" send-keys -t bar -l "$1"; }
screen() { tmux -L "$SOCKET" capture-pane -p -t bar; }
screen_shows() { screen | grep -qF -- "$1"; }

# wait_for TEXT [SECONDS]: until the screen shows TEXT (fixed string).
wait_for() {
    local text=$1 limit=${2:-10}
    wait_until "$limit" screen_shows "$text" && return 0
    fail "timed out waiting for: $text"
    screen | sed 's/^/  | /' >&2
    return 1
}

# Screens carry a port, round-trip times and random tab ids: normalize them.
normalize() {
    sed -E -e "s#${URL}#ws://HOST:PORT#g" -e 's/rtt [0-9]+ms/rtt Nms/g' -e 's/t-[A-Za-z0-9]{8,12}(-[0-9]+)?/t-ID/g'
}

# screen_is NAME: the screen, normalized into $WORK/NAME.txt, equals its golden capture.
screen_is() {
    screen | normalize >"$WORK/$1.txt"
    cmp -s "$GOLDENS/$1.txt" "$WORK/$1.txt"
}

# screen_still NAME: the screen, normalized into $WORK/NAME.txt, is what the previous call saw
# (GENERATE=1 has no golden to wait for, only a screen that stopped changing).
screen_still() {
    local before
    before=$(cat "$WORK/$1.txt" 2>/dev/null || true)
    screen | normalize >"$WORK/$1.txt"
    [ -n "$before" ] && [ "$before" = "$(cat "$WORK/$1.txt")" ]
}

# golden NAME: the screen (normalized) must come to equal Tests/bar/goldens/NAME.txt within 5 s;
# past that, the last capture is shown against it.
golden() {
    local name=$1 file=$GOLDENS/$1.txt
    if [ "${GENERATE:-0}" = 1 ]; then
        # Unchanged over 6 polls in a row (300 ms): the frame is complete.
        local still=0
        rm -f "$WORK/$name.txt"
        for _ in $(seq 100); do
            if screen_still "$name"; then still=$((still + 1)); else still=0; fi
            [ "$still" -ge 6 ] && break
            sleep 0.05
        done
        cp "$WORK/$name.txt" "$file"
        log "wrote $file"
    elif wait_until 5 screen_is "$name"; then
        log "ok: $name"
    else
        diff -u "$file" "$WORK/$name.txt" >"$WORK/$name.diff" 2>&1 || true
        fail "screen $name differs from its golden capture:"
        cat "$WORK/$name.diff" >&2
    fi
}

# expect_exit CODE CMD...: runs a one-shot and checks its exit status.
expect_exit() {
    local want=$1 got=0
    shift
    "$@" >"$WORK/out" 2>"$WORK/err" || got=$?
    if [ "$got" != "$want" ]; then
        fail "exit $got (want $want): $* — $(cat "$WORK/err")"
    fi
}

# --- one-shot commands: output and exit codes ---
log "one-shot commands"
expect_exit 0 ts ls
grep -q "workspace $WS v0, 0 tabs" "$WORK/out" || fail "ls of an empty workspace: $(cat "$WORK/out")"
expect_exit 2 ts mv
expect_exit 2 ts add
expect_exit 2 ts rm no-such-tab
expect_exit 1 "$TABSYNC" ls --server ws://127.0.0.1:1 --workspace "$WS"
grep -q "cannot reach the server" "$WORK/err" || fail "unreachable server message: $(cat "$WORK/err")"
grep -q "Fatal\|Stack\|0x0" "$WORK/err" && fail "unreachable server printed a trace: $(cat "$WORK/err")"
expect_exit 3 ts add --title "$(printf 'bad\033[2Jtitle')"
grep -q "refused: INVALID_ARGUMENT" "$WORK/err" || fail "refusal message: $(cat "$WORK/err")"

# --- history one-shots: log, restore (dry run and real), reopen; on a workspace of their own ---
log "history one-shots"
hs() { WS=hist-test ts "$@"; }
expect_exit 0 hs add --title Docs --url https://docs.example
expect_exit 0 hs add --title Mail
mail_id=$(cat "$WORK/out")
expect_exit 0 hs add --title News
expect_exit 0 hs rm Mail
expect_exit 0 hs rename Docs "Docs v2"
expect_exit 0 hs log
[ "$(wc -l <"$WORK/out")" = 5 ] || fail "log: want 5 lines: $(cat "$WORK/out")"
head -1 "$WORK/out" | grep -qE '^5	20[0-9-]+T[0-9:.]+Z	script	' || fail "log's newest line: $(head -1 "$WORK/out")"
tail -1 "$WORK/out" | grep -q '^1	.*added "Docs"' || fail "log's oldest line: $(tail -1 "$WORK/out")"
expect_exit 0 hs log --limit 2 --json
[ "$(wc -l <"$WORK/out")" = 2 ] || fail "log --limit 2: $(cat "$WORK/out")"
grep -q '"version":"4"' "$WORK/out" || fail "log --json: $(cat "$WORK/out")"
expect_exit 0 hs log --author somebody-else
[ -s "$WORK/out" ] && fail "log --author filters nothing: $(cat "$WORK/out")"
expect_exit 0 hs log --since 1h
[ "$(wc -l <"$WORK/out")" = 5 ] || fail "log --since 1h: $(cat "$WORK/out")"
expect_exit 2 hs log --since yesterday-ish
expect_exit 0 hs restore --version 3 --dry-run
grep -q "+ add $mail_id “Mail” at 2" "$WORK/out" || fail "dry run misses the re-added tab: $(cat "$WORK/out")"
grep -q "title “Docs v2” → “Docs”" "$WORK/out" || fail "dry run misses the rename: $(cat "$WORK/out")"
hs ls | grep -q "Docs v2" || fail "a dry run changed the workspace"
expect_exit 0 hs restore --version 3
[ "$(cat "$WORK/out")" = 6 ] || fail "restore prints the new version: $(cat "$WORK/out")"
hs ls | grep -q "$mail_id  Mail" || fail "restore did not bring Mail back: $(hs ls)"
expect_exit 2 hs restore
expect_exit 2 hs restore --version 2 --at 1h
expect_exit 3 hs restore --version 999
grep -q "refused: INVALID_ARGUMENT" "$WORK/err" || fail "restore outside history: $(cat "$WORK/err")"
expect_exit 1 hs reopen
grep -q "no recently closed tab" "$WORK/err" || fail "reopen with nothing closed: $(cat "$WORK/err")"
expect_exit 0 hs rm News
expect_exit 0 hs reopen
grep -q "	News	" "$WORK/out" || fail "reopen prints the tab: $(cat "$WORK/out")"
expect_exit 0 hs rm Mail
expect_exit 0 hs reopen Ma
grep -q "^$mail_id	Mail" "$WORK/out" || fail "reopen by title prefix: $(cat "$WORK/out")"
expect_exit 1 "$TABSYNC" log --server ws://127.0.0.1:1 --workspace "$WS"

# --- the live bar ---
log "live bar"
start_bar 80 16
wait_for "No tabs. Press n to add one."
wait_for "| connected |"
golden 01-empty

# Edits from the bar: two new tabs.
keys n
wait_for "New tab title:"
typetext "Docs"
keys Enter
wait_for "URL (optional):"
typetext "https://docs.example"
keys Enter
wait_for " 1:Docs*"
keys n
typetext "Mail"
keys Enter Enter
wait_for "2:Mail*"
wait_for "pending 0"
golden 02-bar-edits

# Edits from another client appear: a wide title, a rename, an activation.
ts add --title "日本語タブ" >/dev/null
ts add --title "🚀 launch" --at 1 >/dev/null
ts rename Docs "Docs v2"
ts activate 日本
wait_for "日本語タブ*"
wait_for "Connected (1)"
golden 03-other-client

# The workspace matches what the bar shows.
ts ls | normalize >"$WORK/ls.txt"
for t in "1:🚀 launch" "2:Docs v2" "3:Mail" "4:日本語タブ*"; do
    screen | head -1 | grep -qF "$t" || fail "bar misses $t"
done
grep -q "4  t-ID  日本語タブ .*active" "$WORK/ls.txt" || fail "ls disagrees with the bar: $(cat "$WORK/ls.txt")"

# Move with Shift+Left (as tmux sends it), lock, refused close, badge.
keys S-Left
wait_for "3:日本語タブ*"
keys k
wait_for "日本語タブ🔒*"
keys x
wait_for "refused: LOCKED"
keys b
typetext "7"
keys Enter
wait_for "日本語タブ(7)🔒*"
golden 04-lock-refused

# Browse mode: moving changes only this view; others' activations do not move it.
keys f
wait_for "| browse"
keys h h
wait_for "[1:🚀 launch]"
ts activate 4
wait_for "4:Mail*"
golden 05-browse
keys f
wait_for "| follow"
wait_for "1:🚀 launch*"

# Many tabs, narrow pane: overflow markers, the list, a resize re-lays out.
for i in $(seq 1 12); do ts add --title "tab$i" >/dev/null; done
wait_for "tab12"
tmux -L "$SOCKET" resize-window -t bar -x 40 -y 16
wait_for "›"
keys End
wait_for "‹"
golden 06-overflow
keys 5
wait_for "5:tab1*"
golden 06b-overflow-both-sides
keys End
wait_for "16:tab12*"
keys o
wait_for "All tabs (16)"
keys Up Up
wait_for "> 14:tab10"
golden 07a-list
keys Enter
wait_for "Viewing 14/16: tab10"
golden 07-list-picked
tmux -L "$SOCKET" resize-window -t bar -x 100 -y 16
golden 08-resized

# A hostile title (another client cannot send one: the server refuses it) is covered by the unit
# tests of the cleaner and the renderer.

# q restores the terminal.
keys q
wait_for "EXIT=0"
wait_for "icanon echo" 3 || fail "terminal modes not restored after q"
golden 09-quit-restored
tmux -L "$SOCKET" kill-session -t bar

# Losing the server: the bar says so and counts down; an edit made meanwhile is sent after the
# server comes back (same port; a memory store, so the workspace starts over with a new epoch).
start_bar 80 12
wait_for "| connected |"
port=${URL##*:}
kill "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=
wait_for "reconnecting in"
keys n
typetext "offline edit"
keys Enter Enter
wait_for "pending 1"
"$SERVER" --port "$port" --memory --log-level error >"$WORK/server2.out" 2>"$WORK/server2.err" &
SERVER_PID=$!
wait_for "| connected |" 20
wait_for "pending 0"
wait_for "1:offline edit*"
ts ls | grep -q "offline edit .*active" || fail "the offline edit did not reach the server"
keys q
wait_for "EXIT=0"
tmux -L "$SOCKET" kill-session -t bar

# SIGTERM restores the terminal too.
start_bar 80 12
wait_for "| connected |"
pane_pid=$(tmux -L "$SOCKET" display -p -t bar '#{pane_pid}')
bar_pid=$(pgrep -P "$pane_pid" -x tabsync || true)
[ -n "$bar_pid" ] || fail "no bar process under the pane"
[ -n "$bar_pid" ] && kill -TERM "$bar_pid"
wait_for "EXIT=143"
wait_for "icanon echo" 3 || fail "terminal modes not restored after SIGTERM"
tmux -L "$SOCKET" kill-session -t bar

# u reopens the tab closed last from this bar (not one another client closed after it), then,
# with none left, the workspace's most recently closed; U lists closed tabs, Enter reopens one.
WS=bar-undo
ts add --title One >/dev/null
ts add --title Two >/dev/null
ts add --title Three >/dev/null
ls_shows() { ts ls | grep -qF -- "$1"; }
ls_lacks() { ! ts ls | grep -qF -- "$1"; }
start_bar 80 30  # tall enough for the whole help screen
wait_for "| connected |"
wait_for "3:Three"
keys 2
wait_for "2:Two*"
keys x
wait_for "2:Three"
ts rm One
wait_for "1:Three"
keys u
wait_until 5 ls_shows "Two" || fail "u did not reopen the tab closed here"
ls_lacks "One" || fail "u reopened the tab another client closed first"
keys u
wait_until 5 ls_shows "One" || fail "u with nothing closed here did not reopen the workspace's last closed tab"
ts rm Three
wait_until 5 ls_lacks "Three"
keys U
wait_for "Recently closed (1): ↑↓ select, Enter reopen, Esc close"
wait_for "> Three"
keys Enter
wait_until 5 ls_shows "Three" || fail "Enter in the closed list did not reopen the tab"
keys "?"
wait_for "recently closed tabs (↑ ↓, Enter reopens, Esc closes)"
keys Escape
keys q
wait_for "EXIT=0"
tmux -L "$SOCKET" kill-session -t bar

# Groups (docs/design.md, "Tab groups"): g groups the tab with the next one, t renames the group,
# c recolours it, G puts a tab into a group by title, d ungroups; another client's group change
# shows; without colour braces mark the group. The chip is the group's title in its colour.
WS=grp  # short: the status line must fit 80 columns whatever the port and rtt
ts add --title One >/dev/null
ts add --title Two >/dev/null
ts add --title Three >/dev/null
ls_matches() { ts ls | grep -qE -- "$1"; }
# bar_line_sgr: the bar line with its colours as tmux keeps them (capture-pane -e).
bar_line_sgr() { tmux -L "$SOCKET" capture-pane -p -e -t bar | head -1; }
start_bar 80 24
wait_for "| connected |"
wait_for "3:Three"
keys 1
wait_for " 1:One*"
keys g
wait_for " (untitled)  1:One*  2:Two  3:Three"
wait_until 5 ls_matches '^2 .*Two .*\(untitled\) \(grey\)' || fail "g did not group One and Two: $(ts ls)"
keys t
wait_for "Rename group to:"
typetext "Work"
keys Enter
wait_for " Work  1:One*  2:Two  3:Three"
wait_for "you: renamed group to “Work”"
keys c
wait_for "coloured group “Work” blue"
bar_line_sgr | grep -q $'\e\[[0-9;]*34[0-9;]*m Work ' || fail "the chip is not blue: $(bar_line_sgr | cat -v)"
keys 3
wait_for "3:Three*"
keys G
wait_for "Into group (title; a new one if none has it):"
typetext "Work"
keys Enter
wait_for " Work  1:One  2:Two  3:Three*"
wait_for "you: grouped “Three” into “Work”"
ts ls | grep -q "^3 .*Three .*Work (blue)" || fail "G did not put Three into Work: $(ts ls)"
# Another client renames the group: the bar shows it and names it in the log.
ts group-edit Work --title Shared
wait_for " Shared  1:One  2:Two  3:Three*"
wait_for "script: renamed group “Work” to “Shared”"
# d on a tab inside the group: it leaves and goes after the group's last tab.
keys 2
wait_for "2:Two*"
keys d
wait_for " Shared  1:One  2:Three  3:Two*"
ts ls | grep -q "^3 .*Two  *active" || fail "d did not ungroup Two: $(ts ls)"
golden 10-groups
# The restore dry run names group changes: back at v4 the group was untitled, grey, and held Two.
expect_exit 0 ts restore --version 4 --dry-run
grep -q "^  \* change group “Shared” \[t-[A-Za-z0-9]*-g1\]: title “Shared” → “”, colour blue → grey$" "$WORK/out" \
    || fail "dry run misses the group's rename and colour: $(cat "$WORK/out")"
grep -q "^  \* change t-[A-Za-z0-9]* “Two”: group (none) → (untitled) \[" "$WORK/out" \
    || fail "dry run misses Two's group: $(cat "$WORK/out")"
keys "?"
wait_for "  d t / c C         ungroup / rename its group; next / previous group colour"
keys Escape
keys q
wait_for "EXIT=0"
tmux -L "$SOCKET" kill-session -t bar
# Without colour (NO_COLOR): braces mark the group, and no colour reaches the pane.
BAR_ENV=NO_COLOR=1 start_bar 80 24
wait_for "{Shared 1:One  2:Three } 3:Two*"
bar_line_sgr | grep -qE $'\e\\[(3[0-7]|9[0-7]|38;5;[0-9]+)m' && fail "NO_COLOR bar has colours: $(bar_line_sgr | cat -v)"
keys q
wait_for "EXIT=0"
tmux -L "$SOCKET" kill-session -t bar

if [ "$FAILURES" -gt 0 ]; then
    fatal "$FAILURES bar check(s) failed"
fi
log "bar: all checks passed"
