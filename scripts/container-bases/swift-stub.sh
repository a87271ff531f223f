#!/bin/sh
# `swift` of the swift-stub image (see swift-stub.Containerfile).
set -eu
out=.build/release
case "$*" in
    "build -c release --show-bin-path")
        echo "$PWD/$out" ;;
    "build -c release --product tabsync-server --static-swift-stdlib")
        modules="$(sed -n 's/.*pkgConfig: "\([^"]*\)".*/\1/p' Package.swift | sort -u)"
        [ -n "$modules" ] || { echo "swift stub: Package.swift names no pkgConfig module" >&2; exit 1; }
        # shellcheck disable=SC2086
        pkg-config --print-errors --exists $modules
        for dir in proto Sources Tests; do [ -d "$dir" ] || { echo "swift stub: no $dir/" >&2; exit 1; }; done
        mkdir -p "$out"
        printf '#!/bin/sh\necho "tabsync-server stub (%s)"\n' "$(echo $modules)" > "$out/tabsync-server"
        chmod 755 "$out/tabsync-server" ;;
    *)
        echo "swift stub: unexpected command: swift $*" >&2
        exit 1 ;;
esac
