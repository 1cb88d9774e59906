#!/bin/sh
# The moderator-page test drives Debian's Chromium (never a browser downloaded by a test tool).
# Install it when this machine lets us (root and apt-get); otherwise that one test skips and
# says why. Never fails the build.
[ -x /usr/bin/chromium ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's chromium for the browser test ..."
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null 2>&1 \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1; } \
    || echo "note: could not install chromium; the browser test will skip"
else
  echo "note: /usr/bin/chromium is missing (apt-get install chromium); the browser test will skip"
fi
exit 0
