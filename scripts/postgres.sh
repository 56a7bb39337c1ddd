#!/usr/bin/env bash
# Start a throw-away PostgreSQL server on 127.0.0.1 for the DBOS tests.
#
#   eval "$(scripts/postgres.sh)"          # start; exports JEEVES_PG_URL and JEEVES_PG_DIR
#   scripts/postgres.sh stop "$JEEVES_PG_DIR"
#
# Installs the Debian `postgresql` package when no server binaries are found (needs root
# or sudo). The cluster lives in a temporary folder, trusts local connections only, and
# listens on 127.0.0.1 on a free port. PostgreSQL refuses to run as root, so as root the
# server runs as the `postgres` system user. Diagnostics go to stderr; stdout carries only
# the `export` lines.
set -euo pipefail

log() { echo "postgres.sh: $*" >&2; }

as_owner() {
  if [ "$(id -u)" = "0" ]; then
    if command -v runuser >/dev/null 2>&1; then runuser -u postgres -- "$@"; else su postgres -s /bin/sh -c "$(printf '%q ' "$@")"; fi
  else
    "$@"
  fi
}

find_bin() {
  local d
  if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
    dirname "$(readlink -f "$(command -v pg_ctl)")"; return 0
  fi
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$d" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return 0; fi
  return 1
}

if [ "${1:-}" = "stop" ]; then
  dir="${2:?usage: postgres.sh stop DIR}"
  bin=$(find_bin) || { log "no PostgreSQL binaries found"; exit 1; }
  as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
  rm -rf "$dir"
  exit 0
fi

if ! bin=$(find_bin); then
  log "PostgreSQL not found: installing the Debian package"
  sudo_cmd=""
  [ "$(id -u)" = "0" ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update >&2
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y postgresql >&2
  bin=$(find_bin) || { log "PostgreSQL install failed"; exit 1; }
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/jeeves-pg.XXXXXX")
chmod 700 "$dir"
if [ "$(id -u)" = "0" ]; then
  id postgres >/dev/null 2>&1 || useradd --system --home-dir "$dir" --shell /bin/sh postgres
  chown postgres "$dir"
fi
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

as_owner "$bin/initdb" -D "$dir/data" -U jeeves --auth=trust -E UTF8 --no-sync >/dev/null
as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" start >&2
as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U jeeves jeeves
log "PostgreSQL $("$bin/pg_ctl" --version | awk '{print $3}') on 127.0.0.1:$port (data in $dir)"

echo "export JEEVES_PG_URL=postgresql://jeeves@127.0.0.1:$port/jeeves"
echo "export JEEVES_PG_DIR=$dir"
