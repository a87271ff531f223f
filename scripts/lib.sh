# Shared helpers for tabsync's scripts. Source it; do not run it.
# shellcheck shell=bash

log() { printf '==> %s\n' "$*" >&2; }
fatal() { printf 'error: %s\n' "$*" >&2; exit 1; }

# System packages the build, tests and tools need (Debian names).
TABSYNC_APT_PACKAGES=(libwebsockets-dev libev-dev libwebsockets-evlib-ev libssl-dev libsqlite3-dev libpq-dev postgresql pkg-config tmux)

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
