#!/usr/bin/env bash
# Serve a class from N app processes behind one sticky nginx:
#
#   scripts/serve.sh N [PORT]        (default PORT 8080; Ctrl-C stops everything)
#
# Starts N `streamlit run app.py` processes (app.py's st.App: each browser gets its id
# cookie, ui/browser.py) on free loopback ports, then Debian's nginx
# (`apt-get install nginx`) with its own config (deploy/nginx.conf.template) on PORT,
# with session affinity by cookie, websocket upgrade and /_stcore/metrics blocked.
# Nothing runs as a system service: pid file, logs and temp files live in a run
# directory, $NORMVIZ_SERVE_DIR or a new one under /tmp. There:
#   apps.tsv     one line per app process: index, port, pid
#   app-I.log    that process's output;  access.log, error.log: nginx's
#   ready        written once every process has run app.py once (deploy/warm.py) and
#                nginx answers /_stcore/health
# Environment: NORMVIZ_BIND (nginx's address, default 127.0.0.1; 0.0.0.0 for a room),
# STREAMLIT_SERVER_COOKIE_SECRET (shared by all processes; random by default),
# PYTHON (default python), NGINX (default nginx), and any other STREAMLIT_* setting.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:?usage: scripts/serve.sh N [PORT]}"
port="${2:-8080}"
python="${PYTHON:-python}"
nginx="${NGINX:-nginx}"
bind="${NORMVIZ_BIND:-127.0.0.1}"
command -v "$nginx" >/dev/null || { echo "serve.sh: no nginx (apt-get install nginx)" >&2; exit 1; }
run="${NORMVIZ_SERVE_DIR:-$(mktemp -d /tmp/normviz-serve.XXXXXX)}"
mkdir -p "$run/tmp"
chmod 755 "$run" "$run/tmp"   # nginx's workers (not root) write request bodies there
: > "$run/apps.tsv"
rm -f "$run/ready"
# one secret for every process: a student who moves to another process keeps a valid cookie
export STREAMLIT_SERVER_COOKIE_SECRET="${STREAMLIT_SERVER_COOKIE_SECRET:-$(
  "$python" -c 'import secrets; print(secrets.token_hex(32))')}"

app_pids=()
nginx_pid=""
stop() {
  trap - EXIT INT TERM
  [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null || true
  for pid in "${app_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for _ in $(seq 100); do   # up to 10 s for a clean exit, then SIGKILL
    alive=0
    for pid in $nginx_pid "${app_pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for pid in $nginx_pid "${app_pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ports=($("$python" - "$n" <<'PY'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
))
backends=()
for i in "${!ports[@]}"; do
  p="${ports[$i]}"
  PYTHONUNBUFFERED=1 "$python" -m streamlit run app.py --server.port "$p" \
    --server.address 127.0.0.1 --server.headless true > "$run/app-$i.log" 2>&1 &
  app_pids+=("$!")
  backends+=("127.0.0.1:$p")
  printf '%s\t%s\t%s\n' "$i" "$p" "$!" >> "$run/apps.tsv"
done

wait_healthy() {  # URL...: each answers /_stcore/health within 120 s
  "$python" - "$@" <<'PY'
import sys, time, urllib.request
deadline = time.time() + 120
for url in sys.argv[1:]:
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if time.time() > deadline:
            sys.exit(f"serve.sh: {url} did not become healthy")
        time.sleep(0.3)
PY
}
wait_healthy "${backends[@]/#/http://}"
# one run of app.py per process before any student: imports done, pages-folder mode off
"$python" deploy/warm.py "${backends[@]/#/http://}"

deploy/render-nginx.sh "$run" "$bind:$port" "${backends[@]}" > "$run/nginx.conf"
"$nginx" -p "$run" -c "$run/nginx.conf" -e "$run/error.log" -g "daemon off;" &
nginx_pid="$!"
echo "$nginx_pid" > "$run/nginx-master.pid"
host="$bind"; [ "$bind" = 0.0.0.0 ] && host=127.0.0.1
wait_healthy "http://$host:$port"
touch "$run/ready"
echo "serve.sh: $n processes (${backends[*]}) behind http://$bind:$port; run dir $run"
wait "$nginx_pid"
