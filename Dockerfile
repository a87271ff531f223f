# tabsync-server in a container: built in release with the Swift toolchain image, run as a
# non-root user on Debian 12 with only the C libraries it links (libwebsockets, SQLite, libpq, libcurl).
#   docker build -t tabsync-server .
#   docker run -p 7070:7070 -v tabsync-data:/var/lib/tabsync/data \
#       -v "$PWD/secrets/tabsync-auth.key:/run/secrets/tabsync-auth.key:ro" tabsync-server
# Access control is on: the HS256 secret is read from TABSYNC_AUTH_KEY_FILE (a mounted file; make
# it with `openssl rand -base64 48`, readable by uid 10001). Mint the first token inside:
#   docker exec CONTAINER tabsync-server token --workspace '*' --role admin --ttl 8h --sub you
#
# Build arguments: SWIFT_IMAGE and DEBIAN_IMAGE, the base images of the build and of the runtime.
# A binary built elsewhere, with the same toolchain on Debian 12 (`swift build -c release --product
# tabsync-server --static-swift-stdlib`), goes in without compiling again: put it at
# /usr/local/bin/tabsync-server in an image and build the `prebuilt` target with it
#   docker build --target prebuilt --build-arg TABSYNC_BINARY_IMAGE=IMAGE -t tabsync-server .
# (BuildKit and Podman then skip the build stage). scripts/test-containers does that, so that CI
# does not compile the server a second time.
ARG SWIFT_IMAGE=swift:6.3-bookworm
ARG DEBIAN_IMAGE=debian:bookworm-slim
ARG TABSYNC_BINARY_IMAGE=build

# The toolchain with the C libraries' headers, and the sources: everything `swift build` reads.
FROM ${SWIFT_IMAGE} AS build-env
RUN export DEBIAN_FRONTEND=noninteractive \
    && apt-get update -q \
    && apt-get install -y -q --no-install-recommends libwebsockets-dev libsqlite3-dev libpq-dev libcurl4-openssl-dev libssl-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY Package.swift ./
COPY proto ./proto
COPY Sources ./Sources
COPY Tests ./Tests

FROM build-env AS build
RUN swift build -c release --product tabsync-server --static-swift-stdlib \
    && install -m 0755 "$(swift build -c release --show-bin-path)/tabsync-server" /usr/local/bin/tabsync-server

# The runtime: Debian with only the C libraries the server links, everything but the binary.
FROM ${DEBIAN_IMAGE} AS runtime
RUN export DEBIAN_FRONTEND=noninteractive \
    && apt-get update -q \
    && apt-get install -y -q --no-install-recommends libwebsockets17 libwebsockets-evlib-ev libev4 libsqlite3-0 libpq5 libcurl4 ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/tabsync --shell /usr/sbin/nologin tabsync \
    && mkdir -p /var/lib/tabsync/data \
    && chown -R tabsync:tabsync /var/lib/tabsync
USER tabsync
WORKDIR /var/lib/tabsync
ENV TABSYNC_HOST=0.0.0.0 \
    TABSYNC_PORT=7070 \
    TABSYNC_DATA_DIR=/var/lib/tabsync/data \
    TABSYNC_AUTH_KEY_FILE=/run/secrets/tabsync-auth.key
EXPOSE 7070
VOLUME ["/var/lib/tabsync/data"]
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD curl -fsS http://127.0.0.1:7070/healthz || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["tabsync-server"]

# --target prebuilt: the binary of TABSYNC_BINARY_IMAGE.
FROM ${TABSYNC_BINARY_IMAGE} AS prebuilt-binary
FROM runtime AS prebuilt
COPY --from=prebuilt-binary /usr/local/bin/tabsync-server /usr/local/bin/tabsync-server

# The default: the binary of the build stage.
FROM runtime
COPY --from=build /usr/local/bin/tabsync-server /usr/local/bin/tabsync-server
