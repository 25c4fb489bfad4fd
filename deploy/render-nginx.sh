#!/usr/bin/env bash
# Print an nginx.conf for N app processes: deploy/render-nginx.sh PREFIX LISTEN HOST:PORT...
# PREFIX holds the pid file, logs and temp files; LISTEN is e.g. 127.0.0.1:8080 or 80.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ $# -ge 3 ] || { echo "usage: $0 PREFIX LISTEN HOST:PORT..." >&2; exit 2; }
prefix="$1" listen="$2"
shift 2
servers=""
for backend in "$@"; do
  # 3 failed connections within 10 s: skip this process for 10 s, then try it again
  servers+="        server $backend max_fails=3 fail_timeout=10s;"$'\n'
done
# client_max_body_size follows server.maxUploadSize (MB) in .streamlit/config.toml
config="$here/../.streamlit/config.toml"
mb="$(sed -n 's/^ *maxUploadSize *= *\([0-9]\+\).*/\1/p' "$config" 2>/dev/null | head -n1)"
max_body="$(( ${mb:-200} + 1 ))m"
servers="${servers%$'\n'}"
while IFS= read -r line; do
  case "$line" in
    \#*) printf '%s\n' "$line" ;;   # comments keep the @NAMES@ they explain
    @SERVERS@) printf '%s\n' "$servers" ;;
    *)
      line="${line//@PREFIX@/$prefix}"
      line="${line//@LISTEN@/$listen}"
      line="${line//@MAX_BODY@/$max_body}"
      printf '%s\n' "$line"
      ;;
  esac
done < "$here/nginx.conf.template"
