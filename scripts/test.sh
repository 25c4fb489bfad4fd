#!/usr/bin/env bash
# Set up and run every test: Python packages, Debian's Chromium for the browser
# tests, then pytest (unit, AppTest and real-browser tests).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ]; then apt_get="apt-get"; else apt_get="sudo apt-get"; fi
  DEBIAN_FRONTEND=noninteractive $apt_get update -qq
  DEBIAN_FRONTEND=noninteractive $apt_get install -y -qq chromium >/dev/null
fi
python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
python -m pytest -n 2 "$@"
