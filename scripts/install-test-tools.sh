#!/bin/sh
# Install the non-Python tools the test suite uses, idempotently:
#   bubblewrap (Debian)                 the harness jail
#   @mariozechner/pi-coding-agent (npm) the external agent executor, into .tools/
set -eu
cd "$(dirname "$0")/.."

missing=""
while read -r pkg; do
  [ -z "$pkg" ] && continue
  dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
done < .ci/apt-packages.txt
if [ -n "$missing" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi

PI_VERSION=0.73.1
if [ ! -f .tools/node_modules/@mariozechner/pi-coding-agent/package.json ] || \
   ! grep -q "\"version\": \"$PI_VERSION\"" .tools/node_modules/@mariozechner/pi-coding-agent/package.json; then
  npm install --silent --no-audit --no-fund --prefix .tools "@mariozechner/pi-coding-agent@$PI_VERSION"
fi
