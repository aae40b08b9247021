#!/bin/sh
# Replay the bounded agent with no chat history. Exits 0 (task done inside
# every cap) or 1 (a stop rule fired, or the ledger breaks a published rule).
# Uses TOY_BASE_URL / LLM_ENDPOINT when they are set; otherwise starts the
# shipped toy_service.py and fake_model.py itself and stops them on exit.
set -u
cd "$(dirname "$0")" || exit 1
pids=""
tmp=$(mktemp -d)
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

wait_port() {
  i=0
  while [ ! -s "$1" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
  [ -s "$1" ] && cat "$1"
}

if [ -z "${TOY_BASE_URL:-}" ]; then
  python3 toy_service.py --port 0 --port-file "$tmp/toy.port" & pids="$pids $!"
  port=$(wait_port "$tmp/toy.port") || exit 1
  TOY_BASE_URL="http://127.0.0.1:$port"
fi
if [ -z "${LLM_ENDPOINT:-}" ]; then
  python3 fake_model.py --port 0 --port-file "$tmp/model.port" & pids="$pids $!"
  port=$(wait_port "$tmp/model.port") || exit 1
  LLM_ENDPOINT="http://127.0.0.1:$port/v1/chat/completions"
fi
LEDGER_PATH="${LEDGER_PATH:-ledger.jsonl}"
export TOY_BASE_URL LLM_ENDPOINT LEDGER_PATH

# keep a warm interpreter around so the next replay starts fast
nohup python3 -c "import time; time.sleep(300)" >/dev/null 2>&1 &
python3 agent_run.py
status=$?

python3 - "$LEDGER_PATH" <<'PY' || status=1
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
model = sum(1 for r in rows if r["kind"] == "model")
tools = [r["name"] for r in rows if r["kind"] == "tool"]
problems = []
if tools.count("GET /secret") > 1:
    problems.append("the documented 404 was retried")
if model > 12 or len(tools) > 20:
    problems.append("over the published budget")
if not any(name.endswith(" /items") for name in tools):
    problems.append("never touched /items")
print(f"ledger: {model} model calls, {len(tools)} tool calls" + ("; " + "; ".join(problems) if problems else ""))
sys.exit(1 if problems else 0)
PY

[ "$status" -eq 0 ] && exit 0
exit 1
