#!/usr/bin/env bash
# Render a bench report's HTML in headless Chromium and save a PNG screenshot.
#   scripts/screenshot_report.sh mulligan-demo/report.html report.png
# Needs Debian's chromium (apt-get install chromium).
set -euo pipefail
if [ $# -lt 1 ] || [ ! -f "$1" ]; then
  echo "usage: $0 OUT/report.html [OUT.png]  (the report.html of a bench or demo)" >&2
  exit 2
fi
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "$0: needs Chromium and found none on PATH; install it (apt-get install chromium)" >&2
  exit 127
fi
html=$(realpath "$1")
png=$(realpath -m "${2:-${html%.html}.png}")
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --hide-scrollbars --window-size=1400,1800 \
  --screenshot="$png" "file://$html" 2>/dev/null
echo "$png"
