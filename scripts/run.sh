#!/usr/bin/env bash
# Set up and start the app at http://localhost:8501
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q --disable-pip-version-check -r requirements.txt
exec python -m streamlit run app.py "$@"
