# Shared helpers for tabsync's scripts. Source it; do not run it.
# shellcheck shell=bash

log() { printf '==> %s\n' "$*" >&2; }
fatal() { printf 'error: %s\n' "$*" >&2; exit 1; }

# free_port: prints a TCP port of 127.0.0.1 that no socket uses, in any state, chosen below the
# kernel's ephemeral range (ip_local_port_range): a port for a server to bind later (PostgreSQL,
# HAProxy), which no outgoing connection can take meanwhile. Inside that range, thousands of client
# connections of a load test beside it took the port before the server bound it.
free_port() {
    local low=32768 port
    read -r low _ < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
    [ "$low" -gt 11000 ] || fatal "the ephemeral port range starts at $low: no room below it for a fixed port"
    for _ in $(seq 1 100); do
        port=$((10000 + RANDOM % (low - 10000)))
        ss -Htan "sport = :$port" 2>/dev/null | grep -q . || { echo "$port"; return 0; }
    done
    fatal "no free port found below $low"
}

# listening_url FILE PID [SECONDS]: waits (30 s by default) for the `listening on ws://HOST:PORT` line
# a tabsync-server started in the background writes to its stdout, FILE, and prints the URL in it;
# fails at once when PID exits first, or when the line does not come in time.
listening_url() {
    local file="$1" pid="$2" deadline=$((SECONDS + ${3:-30})) url
    while :; do
        url="$(sed -n 's/^listening on \(wss\{0,1\}:\/\/.*\)$/\1/p' "$file" 2>/dev/null | head -n 1)"
        [ -z "$url" ] || { echo "$url"; return 0; }
        kill -0 "$pid" 2>/dev/null || return 1
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.05
    done
}

# protoc_gen_swift: prints the path of a protoc-gen-swift of the swift-protobuf version Package.resolved
# names, built (debug: it only has to run once per check) from the package's own resolved checkout
# (.build/checkouts/swift-protobuf; resolved first when missing) into $TABSYNC_CACHE (default
# ~/.cache/tabsync) the first time, reused after. The build's output goes to stderr.
protoc_gen_swift() {
    local cache="${TABSYNC_CACHE:-$HOME/.cache/tabsync}" version checkout=.build/checkouts/swift-protobuf
    [ -d "$checkout" ] && [ -f Package.resolved ] || swift package resolve >&2 || fatal "swift package resolve failed"
    version="$(grep -A 8 '"identity" : "swift-protobuf"' Package.resolved | sed -n 's/.*"version" : "\(.*\)".*/\1/p')"
    [ -n "$version" ] || fatal "Package.resolved names no swift-protobuf version"
    local plugin="$cache/bin/protoc-gen-swift-$version"
    if [ ! -x "$plugin" ]; then
        log "building protoc-gen-swift $version from $checkout (once; cached in $cache)"
        mkdir -p "$cache/bin"
        swift build --package-path "$checkout" --scratch-path "$cache/swift-protobuf-$version-build" \
            --product protoc-gen-swift >&2 || fatal "could not build protoc-gen-swift $version"
        cp "$cache/swift-protobuf-$version-build/debug/protoc-gen-swift" "$plugin.tmp"
        mv "$plugin.tmp" "$plugin"
        rm -rf "$cache/swift-protobuf-$version-build"
    fi
    echo "$plugin"
}

# generate_proto OUT_DIR: runs protoc with protoc_gen_swift on proto/tabsync/v1/tabsync.proto, writing
# OUT_DIR/tabsync.pb.swift with the options Sources/TabsyncProto/Generated/ was made with.
generate_proto() {
    ensure_packages protobuf-compiler
    local plugin
    plugin="$(protoc_gen_swift)"
    protoc --plugin=protoc-gen-swift="$plugin" --proto_path=proto \
        --swift_opt=Visibility=Public --swift_opt=FileNaming=DropPath \
        --swift_out="$1" proto/tabsync/v1/tabsync.proto || fatal "protoc could not generate from proto/tabsync/v1/tabsync.proto"
}

# System packages the build, tests and tools need (Debian names).
# openssl and curl: the TLS tests make certificates and speak https:// with them.
TABSYNC_APT_PACKAGES=(libwebsockets-dev libev-dev libwebsockets-evlib-ev libssl-dev libsqlite3-dev pkg-config tmux openssl curl libpq-dev postgresql)
# haproxy: the address in front of several nodes (deploy/haproxy.cfg; scripts/cluster and the
# cluster tests run it).
TABSYNC_APT_PACKAGES+=(haproxy)

# What the browser tests need (scripts/test): Debian's Chromium and its WebDriver, Firefox ESR (driven
# over its own Marionette: Debian has no geckodriver), fonts for emoji
# and CJK titles (so the screenshots show glyphs, not boxes), node for the key-vector tests.
TABSYNC_WEB_TEST_PACKAGES=(chromium chromium-driver firefox-esr fonts-noto-color-emoji fonts-wqy-microhei nodejs)
# promtool (Debian's prometheus, about 17 s and 96 MB): Tests/scripts/test_monitoring.py checks and
# unit-tests deploy/prometheus/tabsync.rules.yml with it.
TABSYNC_WEB_TEST_PACKAGES+=(prometheus)
# Python packages of the pytest suites, pinned (PyPI): the browser tests (selenium) and the
# third-party token test (Tests/thirdparty: PyJWT mints HS256/EdDSA/ES256 tokens, cryptography makes
# their keys; it connects with websockets, from TABSYNC_PYTHON_MODULES).
TABSYNC_PIP_PACKAGES=(selenium==4.51.0 "pytest>=8" PyJWT==2.15.1 "cryptography>=42" "PyYAML>=6")

# ensure_packages [PKG...]: installs with apt only the packages that are missing.
ensure_packages() {
    local wanted=("$@")
    [ ${#wanted[@]} -gt 0 ] || wanted=("${TABSYNC_APT_PACKAGES[@]}")
    local missing=()
    local p
    for p in "${wanted[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null || fatal "missing packages (${missing[*]}) and no apt-get to install them"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    log "installing missing packages: ${missing[*]}"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
        || fatal "apt-get could not install: ${missing[*]}"
}

# Python modules the tests need, by import name (the same as the PyPI name): the /metrics test
# checks the exposition with prometheus_client's parser; a TLS test holds a wss:// session with
# websockets (a third-party client). Installed with pip for the python3 on PATH (9-13 s on this
# project's machine; promtool, from Debian's prometheus, took 14 s and 96 MB).
# setuptools and wheel build the Python client's wheel offline (Tests/clients/python/test_packages.py:
# `pip wheel --no-build-isolation --no-index`).
TABSYNC_PYTHON_MODULES=(prometheus_client websockets setuptools wheel)

# ensure_python_modules [MODULE...]: installs only the modules python3 cannot import: with pip, or,
# where pip may not install (Debian's own python3), Debian's python3-NAME package.
ensure_python_modules() {
    local wanted=("$@")
    [ ${#wanted[@]} -gt 0 ] || wanted=("${TABSYNC_PYTHON_MODULES[@]}")
    command -v python3 >/dev/null || ensure_packages python3 python3-pip
    local missing=()
    local m
    for m in "${wanted[@]}"; do
        python3 -c "import $m" 2>/dev/null || missing+=("$m")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing missing Python modules: ${missing[*]}"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check "${missing[@]}" >&2 || {
        local debian=()
        for m in "${missing[@]}"; do debian+=("python3-${m//_/-}"); done
        ensure_packages "${debian[@]}"
    }
    for m in "${missing[@]}"; do
        python3 -c "import $m" 2>/dev/null || fatal "python3 cannot import $m after installing it"
    done
}

# ensure_pip_packages: installs TABSYNC_PIP_PACKAGES when an import or pin is missing.
ensure_pip_packages() {
    command -v python3 >/dev/null || ensure_packages python3 python3-pip
    if python3 - <<'PY' 2>/dev/null; then return 0; fi
import importlib.metadata as m, sys
import cryptography, jwt, yaml
sys.exit(0 if m.version("selenium") == "4.51.0" and int(m.version("pytest").split(".")[0]) >= 8
         and m.version("PyJWT") == "2.15.1" and int(m.version("cryptography").split(".")[0]) >= 42 else 1)
PY
    python3 -m pip --version >/dev/null 2>&1 || ensure_packages python3-pip
    log "installing Python packages: ${TABSYNC_PIP_PACKAGES[*]}"
    python3 -m pip install -q --disable-pip-version-check "${TABSYNC_PIP_PACKAGES[@]}" 2>/dev/null \
        || python3 -m pip install -q --disable-pip-version-check --break-system-packages "${TABSYNC_PIP_PACKAGES[@]}" \
        || fatal "pip could not install: ${TABSYNC_PIP_PACKAGES[*]}"
}
