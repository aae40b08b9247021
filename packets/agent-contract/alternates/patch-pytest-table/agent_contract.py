"""Contract gate for agent-proposed writes.

A proposal (JSON: behavior_id, src_path, test_path, diff) is written to the
repository only when the behaviour's contract test is red before the write and
green after it. Checks run in the order of the brief; the first failing check
decides the result, and every refusal leaves the repository untouched.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

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

BLOCKED_SEGMENTS = {"vendor", "node_modules", "third_party", "site-packages", "dist", "build", ".git"}
BLOCKED_SUFFIXES = (".pem", ".key", ".lock")
NODE_TIMEOUT = 120


@dataclass(frozen=True)
class Result:
    code: str
    reason: str
    touched: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.code]


class Refusal(Exception):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


# ---------------------------------------------------------------- 1. document

def _no_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise Refusal("bad-proposal", f"duplicate key {key!r}")
        seen[key] = value
    return seen


def load_proposal(path) -> dict:
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise Refusal("bad-proposal", f"cannot read the proposal as UTF-8: {exc}")
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates)
    except ValueError as exc:
        raise Refusal("bad-proposal", f"not JSON: {exc}")
    if not isinstance(doc, dict):
        raise Refusal("bad-proposal", "the proposal is not a JSON object")
    missing = [k for k in REQUIRED_KEYS if k not in doc]
    extra = sorted(k for k in doc if k not in REQUIRED_KEYS)
    if missing or extra:
        raise Refusal("bad-proposal", f"keys must be exactly {', '.join(REQUIRED_KEYS)}"
                      f" (missing: {missing or 'none'}, extra: {extra or 'none'})")
    for key in REQUIRED_KEYS:
        if not isinstance(doc[key], str) or not doc[key]:
            raise Refusal("bad-proposal", f"{key} must be a non-empty string")
    return doc


# ---------------------------------------------------------------- 2. paths

def read_allowlist(repo: Path) -> list[str]:
    try:
        lines = (repo / "allowlist.txt").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]


def allowed(path: str, allowlist: list[str]) -> bool:
    for entry in allowlist:
        if entry.endswith("/"):
            if path.startswith(entry):
                return True
        elif path == entry:
            return True
    return False


def check_path(label: str, path: str, repo: Path, allowlist: list[str]) -> None:
    def bad(why):
        raise Refusal("unsafe-path", f"{label} {path!r}: {why}")

    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        bad("absolute paths are not allowed")
    if "\\" in path:
        bad("contains a backslash")
    segments = path.split("/")
    if any(s in ("", ".", "..") for s in segments):
        bad("has an empty, '.' or '..' segment")
    for segment in segments:
        low = segment.lower()
        if low in BLOCKED_SEGMENTS or "secret" in low or low.startswith(".env"):
            bad(f"segment {segment!r} is off limits")
    if segments[-1].lower().endswith(BLOCKED_SUFFIXES):
        bad("key, certificate and lock files are off limits")
    if not allowed(path, allowlist):
        bad("not on allowlist.txt")
    # never follow a symlink out of the repository
    here = repo.resolve()
    target = (repo / path).resolve()
    if here not in target.parents:
        bad("resolves outside the repository")


def check_roles(src: str, test: str) -> None:
    test_parts = test.split("/")
    name = test_parts[-1]
    if test_parts[0] != "tests" or not (name.startswith("test_") and name.endswith(".py")):
        raise Refusal("unsafe-path", f"test_path {test!r} is not a test module (tests/.../test_*.py)")
    if not src.endswith(".py") or src.split("/")[0] == "tests":
        raise Refusal("unsafe-path", f"src_path {src!r} must be a .py file outside tests/")
    if src == test:
        raise Refusal("unsafe-path", "src_path and test_path are the same file")


# ---------------------------------------------------------------- 3. diff paths

def diff_paths(diff: str, src: str, test: str) -> tuple[str, ...]:
    named = []
    problems = []
    lines = diff.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("diff --git "):
            parts = line.split()
            named += [p[2:] if p[:2] in ("a/", "b/") else p for p in parts[2:4]]
        elif re.match(r"^(rename|copy) (from|to) |^similarity index |^(old|new) mode |^GIT binary patch|^Binary files ", line):
            problems.append(" ".join(line.split()[:2]))
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old = line[4:].split("\t")[0].strip()
            new = lines[i + 1][4:].split("\t")[0].strip()
            for header, prefix in ((old, "a/"), (new, "b/")):
                if header == "/dev/null":
                    continue
                if not header.startswith(prefix):
                    raise Refusal("diff-rejected", f"file header {header!r} lacks the {prefix} prefix")
                named.append(header[2:])
            if old != "/dev/null" and new != "/dev/null" and old[2:] != new[2:]:
                problems.append("rename")
            if new == "/dev/null":
                problems.append("file deletion")
    if not named:
        raise Refusal("diff-rejected", "the diff has no file headers")
    outside = sorted({p for p in named if p not in (src, test)})
    if outside:
        raise Refusal("unsafe-path", "the diff touches paths besides src_path and test_path: "
                      + ", ".join(outside))
    if problems:
        raise Refusal("diff-rejected", "renames, copies, mode changes and binary parts are refused: "
                      + ", ".join(sorted(set(problems))))
    return tuple(dict.fromkeys(named))


# ---------------------------------------------------------------- 5. the contract node

def run_node(repo: Path, node: str) -> int:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", node],
                              cwd=repo, capture_output=True, text=True, timeout=NODE_TIMEOUT,
                              env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return -1
    return done.returncode


def patch(repo: Path, diff: str, dry_run: bool) -> subprocess.CompletedProcess:
    argv = ["patch", "-p1", "--batch", "--forward", "--fuzz=0", "--no-backup-if-mismatch",
            "--reject-file=-", "--quiet"]
    if dry_run:
        argv.append("--dry-run")
    return subprocess.run(argv, cwd=repo, input=diff, capture_output=True, text=True,
                          timeout=60)


# ---------------------------------------------------------------- the gate

def gate(proposal_path: str | os.PathLike, repo_root: str | os.PathLike) -> Result:
    repo = Path(repo_root)
    try:
        doc = load_proposal(proposal_path)
        src, test = doc["src_path"], doc["test_path"]
        allowlist = read_allowlist(repo)
        for label, path in (("src_path", src), ("test_path", test)):
            check_path(label, path, repo, allowlist)
        check_roles(src, test)
        touched = diff_paths(doc["diff"], src, test)

        try:
            contracts = json.loads((repo / "contracts.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise Refusal("contract-error", f"cannot read contracts.json: {exc}")
        if not isinstance(contracts, dict) or doc["behavior_id"] not in contracts:
            raise Refusal("unknown-behavior", f"{doc['behavior_id']!r} is not in contracts.json")
        node = contracts[doc["behavior_id"]]
        if not isinstance(node, str) or not node:
            raise Refusal("contract-error", f"contracts.json maps {doc['behavior_id']!r} to no node id")

        before = run_node(repo, node)
        if before == 0:
            raise Refusal("contract-green", f"{node} already passes on HEAD; nothing to prove")
        if before != 1:
            raise Refusal("contract-error", f"{node} did not run cleanly on HEAD (exit {before})")

        snapshot = {p: ((repo / p).read_bytes() if (repo / p).is_file() else None) for p in touched}
        dry = patch(repo, doc["diff"], dry_run=True)
        if dry.returncode != 0:
            raise Refusal("diff-rejected", "the diff does not apply cleanly: "
                          + " ".join((dry.stdout + dry.stderr).split())[:300])
        applied = patch(repo, doc["diff"], dry_run=False)
        if applied.returncode != 0:
            restore(repo, snapshot)
            raise Refusal("diff-rejected", "the diff failed to apply; files restored")

        after = run_node(repo, node)
        if after == 0:
            return Result("applied", f"{node} is green after the write", touched)
        restore(repo, snapshot)
        return Result("reverted", f"{node} still fails after the write (exit {after}); "
                      f"restored {', '.join(touched)}", touched)
    except Refusal as refusal:
        return Result(refusal.code, refusal.reason)


def restore(repo: Path, snapshot: dict) -> None:
    for rel, data in snapshot.items():
        target = repo / rel
        if data is None:
            if target.exists():
                target.unlink()
            parent = target.parent
            while parent != repo and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent
        else:
            target.write_bytes(data)


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
