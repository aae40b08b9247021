#!/bin/sh
# Replay the bounded agent run (see PROMPT.md, STOP.md).
#   sh replay.sh
# With TOY_BASE_URL and LLM_ENDPOINT set, it uses them and starts nothing.
# Otherwise it starts the shipped toy_service.py and/or fake_model.py on free
# loopback ports and stops them again before it exits.
# The ledger goes to $LEDGER_PATH (default ledger.jsonl). Exit status: 0 or 1.

HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
LEDGER_PATH=${LEDGER_PATH:-ledger.jsonl}
export LEDGER_PATH

WORK=$(mktemp -d "${TMPDIR:-/tmp}/replay.XXXXXX") || exit 1
TOY_PID=
MODEL_PID=
AGENT_PID=

cleanup() {
    for pid in $AGENT_PID $TOY_PID $MODEL_PID; do
        kill "$pid" 2>/dev/null
    done
    for pid in $AGENT_PID $TOY_PID $MODEL_PID; do
        wait "$pid" 2>/dev/null
    done
    AGENT_PID=
    TOY_PID=
    MODEL_PID=
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# wait_port FILE: print the port written to FILE, waiting up to 10 s.
wait_port() {
    n=0
    while [ "$n" -lt 100 ]; do
        if [ -s "$1" ]; then
            cat "$1"
            return 0
        fi
        sleep 0.1
        n=$((n + 1))
    done
    return 1
}

if [ -z "$TOY_BASE_URL" ]; then
    "$PY" "$HERE/toy_service.py" --port 0 --port-file "$WORK/toy.port" >/dev/null 2>&1 &
    TOY_PID=$!
    port=$(wait_port "$WORK/toy.port") || { echo "replay.sh: toy service did not start" >&2; exit 1; }
    TOY_BASE_URL="http://127.0.0.1:$port"
    echo "replay.sh: started toy_service.py on $TOY_BASE_URL" >&2
fi
if [ -z "$LLM_ENDPOINT" ]; then
    "$PY" "$HERE/fake_model.py" --port 0 --port-file "$WORK/model.port" >/dev/null 2>&1 &
    MODEL_PID=$!
    port=$(wait_port "$WORK/model.port") || { echo "replay.sh: fake model did not start" >&2; exit 1; }
    LLM_ENDPOINT="http://127.0.0.1:$port/v1/chat/completions"
    echo "replay.sh: started fake_model.py on $LLM_ENDPOINT" >&2
fi
export TOY_BASE_URL LLM_ENDPOINT

# The driver runs in the background so that a signal to this script reaches
# the trap at once (and the trap stops the driver and the services).
"$PY" "$HERE/agent_run.py" &
AGENT_PID=$!
wait "$AGENT_PID"
status=$?
AGENT_PID=
if [ "$status" -ne 0 ]; then
    status=1
fi
exit "$status"
