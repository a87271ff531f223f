# Shared helpers for tabsync's scripts. Source it; do not run it.
# shellcheck shell=bash

log() { printf '==> %s\n' "$*" >&2; }
fatal() { printf 'error: %s\n' "$*" >&2; exit 1; }

# System packages the build, tests and tools need (Debian names).
TABSYNC_APT_PACKAGES=(libwebsockets-dev libev-dev libwebsockets-evlib-ev libssl-dev libsqlite3-dev pkg-config tmux)

# What the browser tests need (scripts/test): Debian's Chromium and its WebDriver, fonts for emoji
# and CJK titles (so the screenshots show glyphs, not boxes), node for the key-vector tests.
TABSYNC_WEB_TEST_PACKAGES=(chromium chromium-driver fonts-noto-color-emoji fonts-wqy-microhei nodejs)
# Python packages of the browser tests, pinned (PyPI).
TABSYNC_PIP_PACKAGES=(selenium==4.51.0 "pytest>=8")

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

# ensure_pip_packages: installs the browser tests' Python packages when an import or pin is missing.
ensure_pip_packages() {
    command -v python3 >/dev/null || ensure_packages python3 python3-pip
    if python3 - <<'PY' 2>/dev/null; then return 0; fi
import importlib.metadata as m, sys
sys.exit(0 if m.version("selenium") == "4.51.0" and int(m.version("pytest").split(".")[0]) >= 8 else 1)
PY
    python3 -m pip --version >/dev/null 2>&1 || ensure_packages python3-pip
    log "installing Python packages: ${TABSYNC_PIP_PACKAGES[*]}"
    python3 -m pip install -q --disable-pip-version-check "${TABSYNC_PIP_PACKAGES[@]}" 2>/dev/null \
        || python3 -m pip install -q --disable-pip-version-check --break-system-packages "${TABSYNC_PIP_PACKAGES[@]}" \
        || fatal "pip could not install: ${TABSYNC_PIP_PACKAGES[*]}"
}
