#!/bin/sh
# Cold replay. Uses TOY_BASE_URL / LLM_ENDPOINT if set; otherwise starts the
# shipped toy_service.py and fake_model.py and kills both on exit.
cd "$(dirname "$0")" || exit 1
work=$(mktemp -d)
toy_pid=
model_pid=
finish() {
  [ -n "$toy_pid" ] && kill "$toy_pid" 2>/dev/null && wait "$toy_pid" 2>/dev/null
  [ -n "$model_pid" ] && kill "$model_pid" 2>/dev/null && wait "$model_pid" 2>/dev/null
  rm -rf "$work"
}
trap finish EXIT
trap 'exit 1' HUP INT TERM

port_of() {
  n=0
  until [ -s "$1" ]; do
    n=$((n + 1)); [ "$n" -gt 200 ] && return 1
    sleep 0.05
  done
  cat "$1"
}

if [ -z "$TOY_BASE_URL" ]; then
  python3 toy_service.py --port 0 --port-file "$work/toy" &
  toy_pid=$!
  TOY_BASE_URL="http://127.0.0.1:$(port_of "$work/toy")" || exit 1
fi
if [ -z "$LLM_ENDPOINT" ]; then
  python3 fake_model.py --port 0 --port-file "$work/model" &
  model_pid=$!
  LLM_ENDPOINT="http://127.0.0.1:$(port_of "$work/model")/v1/chat/completions" || exit 1
fi
export TOY_BASE_URL LLM_ENDPOINT
export LEDGER_PATH="${LEDGER_PATH:-ledger.jsonl}"

python3 agent_run.py
[ $? -eq 0 ] && exit 0
exit 1
