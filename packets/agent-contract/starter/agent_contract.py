"""Contract gate for agent-proposed writes (first draft from the pairing session).

The agent hands over a proposal document (JSON) and this module applies it to
the repository. Right now it only checks that the keys are there and then
writes the diff. The brief in PROMPT.md says what the gate must refuse; the
public surface below (REQUIRED_KEYS, EXIT_CODES, Result, gate, main) is fixed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REQUIRED_KEYS = ("behavior_id", "src_path", "test_path", "diff")

EXIT_CODES = {
    "applied": 0,
    "bad-proposal": 2,
    "unsafe-path": 3,
    "unknown-behavior": 4,
    "contract-green": 5,
    "contract-error": 6,
    "diff-rejected": 7,
    "reverted": 8,
}


@dataclass(frozen=True)
class Result:
    code: str
    reason: str
    touched: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.code]


def gate(proposal_path: str | os.PathLike, repo_root: str | os.PathLike) -> Result:
    repo = Path(repo_root)
    try:
        proposal = json.loads(Path(proposal_path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return Result("bad-proposal", str(exc))
    if not isinstance(proposal, dict) or any(key not in proposal for key in REQUIRED_KEYS):
        return Result("bad-proposal", "missing keys")
    done = subprocess.run(["patch", "-p1", "--batch"], cwd=repo, input=proposal["diff"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return Result("diff-rejected", done.stdout + done.stderr)
    return Result("applied", f"wrote {proposal['src_path']}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not 1 <= len(args) <= 2:
        print("usage: python3 agent_contract.py PROPOSAL.json [REPO_ROOT]", file=sys.stderr)
        return 2
    result = gate(args[0], args[1] if len(args) == 2 else "repo")
    print(f"{result.code}: {result.reason}")
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
