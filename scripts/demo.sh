#!/usr/bin/env bash
# `make demo`: the main job on the shipped fixtures, offline. Works on copies in .demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
DEMO=.demo
rm -rf "$DEMO" && mkdir -p "$DEMO"
cp fixtures/samples/messy-s2.canonical.jsonl "$DEMO/session.jsonl"
cp fixtures/samples/small-s1.canonical.jsonl "$DEMO/small.jsonl"
cp fixtures/samples/small-s1.claude-code.jsonl "$DEMO/claude-session.jsonl"
# session.jsonl ends in a line its (crashed) writer never finished. A last line without a
# newline counts as torn only once the file has been quiet for --torn-wait (300 s): before
# that compactctl waits for the writer, as it must for a live agent. Date the copy an hour back.
touch -d '1 hour ago' "$DEMO/session.jsonl"
export COMPACTCTL_DB="$DEMO/compactctl.db"

# the command lines in bold on a terminal (NO_COLOR unset), plain elsewhere
if [ -t 2 ] && [ -z "${NO_COLOR:-}" ]; then B=$'\033[1m' R=$'\033[0m'; else B='' R=''; fi
step() { printf '\n%s$ %s%s\n' "$B" "$*" "$R" >&2; "$@"; }

echo "== 1. What is in a long session (prompt estimate, biggest tool outputs, findings)"
step $BIN/compactctl inspect "$DEMO/session.jsonl"

echo "== 2. Compact it in place: micro compaction + an offline extractive summary"
step $BIN/compactctl compact --force "$DEMO/session.jsonl"
step $BIN/compactctl compact --force "$DEMO/session.jsonl"   # idempotent: appends nothing
step $BIN/compactctl inspect --json "$DEMO/session.jsonl" --estimate \
  | $BIN/python -c 'import json,sys; f=json.load(sys.stdin)["files"][0]; print("tokens (chars-based estimate)", f["tokens"], "-> effective", f["effectiveTokens"], "| history:", [h.get("mode") or h.get("format") for h in f["history"]])'

echo "== 3. What did the compaction keep? Probes from the original messages, in the effective context"
step $BIN/compactctl eval "$DEMO/session.jsonl"
step $BIN/compactctl eval --compare default "$DEMO/small.jsonl"
step $BIN/compactctl eval --min-retention 0.9 --min error=1 --json "$DEMO/session.jsonl" >/dev/null \
  && echo "CI gate passed (exit 0): retention >= 0.9, every error line kept"

echo "== 4. The layers as a pipe: rules | dedup | compact, stdin to stdout"
printf '\n%s$ compactctl rules - < small.jsonl | compactctl dedup - | compactctl compact --force --materialize - > context.jsonl%s\n' "$B" "$R" >&2
$BIN/compactctl rules - < "$DEMO/small.jsonl" | $BIN/compactctl dedup - \
  | $BIN/compactctl compact --force --materialize - > "$DEMO/context.jsonl"
echo "context.jsonl: $(grep -c '"type":"message"' "$DEMO/context.jsonl") messages (from $(grep -c '"type":"message"' "$DEMO/small.jsonl"))"

echo "== 5. A Claude Code session file: read as is, written as canonical JSONL with -o"
step $BIN/compactctl compact --force -o "$DEMO/claude-compacted.jsonl" "$DEMO/claude-session.jsonl"

echo "== 6. Tiers: L0/L1/L2 from the newest summary, recorded on a superseding SummaryEvent"
step $BIN/compactctl tiers "$DEMO/session.jsonl"
step $BIN/compactctl tiers "$DEMO/session.jsonl"   # idempotent

echo "== 7. Across sessions, from the SQLite store: runs per day, tokens saved, breakers"
step $BIN/compactctl inspect --store
