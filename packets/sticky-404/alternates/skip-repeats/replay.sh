#!/bin/sh
# Cold replay of the bounded agent: all the work is in replay_local.py, which
# starts the shipped services only when TOY_BASE_URL / LLM_ENDPOINT are unset
# and stops whatever it started before it exits. Exit 0 or 1.
cd "$(dirname "$0")" || exit 1
python3 replay_local.py
