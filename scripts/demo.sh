#!/usr/bin/env bash
# `make demo`: the main job on the shipped fixtures, offline. Works on copies in .demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
DEMO=.demo
rm -rf "$DEMO" && mkdir -p "$DEMO"
cp fixtures/samples/small-s1.canonical.jsonl "$DEMO/session.jsonl"
export COMPACTCTL_DB="$DEMO/compactctl.db"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step $BIN/compactctl inspect "$DEMO/session.jsonl"
