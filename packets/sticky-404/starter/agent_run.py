"""Your bounded agent goes here (see PROMPT.md).

Reads TOY_BASE_URL, LLM_ENDPOINT and LEDGER_PATH from the environment.
Exit 0: the model said done and the run stopped inside every cap.
Exit 1: a stop rule halted the run.
"""

import sys


def main() -> int:
    print("agent_run.py: not written yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
