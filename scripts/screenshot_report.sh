#!/usr/bin/env bash
# Render a bench report's HTML in headless Chromium and save a PNG screenshot.
#   scripts/screenshot_report.sh mulligan-demo/report.html report.png
# Needs Debian's chromium (apt-get install chromium).
set -euo pipefail
html=$(realpath "$1")
png=$(realpath -m "${2:-${html%.html}.png}")
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --hide-scrollbars --window-size=1400,1800 \
  --screenshot="$png" "file://$html" 2>/dev/null
echo "$png"
