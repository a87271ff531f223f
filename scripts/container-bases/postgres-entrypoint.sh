#!/bin/sh
# The official postgres image's entrypoint, reduced to what docker-compose.yml uses: as root, own
# the data dir and drop to the postgres user; on an empty data dir, initdb with POSTGRES_USER and
# POSTGRES_PASSWORD, create POSTGRES_DB, then run the server on every address. The setup server
# listens on a private socket only, so pg_isready (the health check) fails until the real one runs.
set -eu
if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA" /var/run/postgresql
    chown -R postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
[ "${1:-postgres}" = postgres ] || exec "$@"
[ $# -eq 0 ] || shift
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    [ -n "${POSTGRES_PASSWORD:-}" ] || { echo "POSTGRES_PASSWORD is not set" >&2; exit 1; }
    pwfile="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    setup="$(mktemp -d)"
    pg_ctl -D "$PGDATA" -w -o "-c listen_addresses='' -c unix_socket_directories=$setup" start >/dev/null
    [ "$db" = postgres ] || psql -h "$setup" -U "$user" -d postgres -v ON_ERROR_STOP=1 -q \
        -c "CREATE DATABASE \"$db\" OWNER \"$user\""
    pg_ctl -D "$PGDATA" -w -m fast stop >/dev/null
    rmdir "$setup"
    echo "initialized $PGDATA (user $user, database $db)"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
