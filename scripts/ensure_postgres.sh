#!/usr/bin/env bash
# The PostgreSQL tests start their own throwaway server on loopback; they need the
# server binaries (initdb, postgres, pg_ctl). Install Debian's package when they are
# missing and we can; otherwise say so (the tests then fail with the same message).
set -euo pipefail

have_server() {
  command -v initdb >/dev/null && command -v pg_ctl >/dev/null && return 0
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}

if have_server; then
  echo "setup: PostgreSQL server binaries      skipped (present)"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null ||
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null; }
  echo "setup: PostgreSQL server binaries      installed (Debian package postgresql)"
else
  echo "setup: PostgreSQL server binaries      MISSING: install your distribution's postgresql" \
       "package (the PostgreSQL tests need initdb and pg_ctl)" >&2
fi
