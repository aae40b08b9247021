#!/bin/sh
# sh replay.sh -- one bounded agent run; exits 0 (model said done) or 1 (halted).
#
# TOY_BASE_URL / LLM_ENDPOINT set: used as they are, nothing is started.
# Either one unset: the shipped toy_service.py / fake_model.py is started on a
# free loopback port for this run and stopped before the script exits.
# Ledger: $LEDGER_PATH, default ledger.jsonl.

dir=$(cd "$(dirname "$0")" && pwd)
: "${LEDGER_PATH:=ledger.jsonl}"
export LEDGER_PATH
scratch=$(mktemp -d) || exit 1
children=""

stop_children() {
    [ -n "$children" ] && kill $children 2>/dev/null
    for child in $children; do wait "$child" 2>/dev/null; done
    children=""
    rm -rf "$scratch"
}
trap stop_children EXIT
trap 'exit 1' HUP INT TERM

# launch NAME SCRIPT: start SCRIPT on a free port and set $port once it is known.
# (Runs in this shell, not in $(...), so that $children keeps the pid.)
launch() {
    python3 "$dir/$2" --port 0 --port-file "$scratch/$1.port" >/dev/null 2>&1 &
    children="$children $!"
    tries=0
    until [ -s "$scratch/$1.port" ]; do
        tries=$((tries + 1))
        if [ "$tries" -gt 100 ]; then
            echo "replay.sh: $2 gave no port within 10 s" >&2
            return 1
        fi
        sleep 0.1
    done
    port=$(cat "$scratch/$1.port")
}

if [ -z "$TOY_BASE_URL" ]; then
    launch toy toy_service.py || exit 1
    TOY_BASE_URL="http://127.0.0.1:$port"
fi
if [ -z "$LLM_ENDPOINT" ]; then
    launch llm fake_model.py || exit 1
    LLM_ENDPOINT="http://127.0.0.1:$port/v1/chat/completions"
fi
export TOY_BASE_URL LLM_ENDPOINT
echo "replay.sh: toy=$TOY_BASE_URL llm=$LLM_ENDPOINT ledger=$LEDGER_PATH" >&2

python3 "$dir/agent_run.py" &
children="$children $!"
wait $!
rc=$?
[ "$rc" -eq 0 ] || rc=1
exit "$rc"
