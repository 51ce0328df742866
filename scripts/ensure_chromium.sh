#!/usr/bin/env bash
# The report test opens `robot-memory report`'s HTML in a real headless Chromium. Install
# Debian's package when it is missing and we can; otherwise say so (the test then fails
# with the same message).
set -euo pipefail

step() { printf 'setup: %-34s %s\n' "$1" "$2"; }
have_chromium() { command -v chromium >/dev/null || command -v chromium-browser >/dev/null; }

if have_chromium; then
  step "headless Chromium" "skipped (present)"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null ||
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }
  step "headless Chromium" "installed (Debian package chromium)"
else
  step "headless Chromium" "MISSING: install your distribution's chromium package (the report's browser test needs it)" >&2
fi
