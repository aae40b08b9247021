"""Contract gate for agent-proposed writes.

An agent may only change the repository through a proposal document (JSON)
with exactly four keys: behavior_id, src_path, test_path, diff. The gate
refuses the write unless, in this order:

  1. the document is a JSON object with exactly those keys, all non-empty
     strings (duplicate keys count as malformed)       -> else bad-proposal
  2. src_path and test_path are safe, on the allowlist, and test_path is a
     test module                                       -> else unsafe-path
  3. every path the diff names is src_path or test_path -> else unsafe-path
     (and the diff has plain ---/+++ headers)          -> else diff-rejected
  4. behavior_id maps to a pytest node in contracts.json -> else unknown-behavior
  5. that node is red on the current tree              -> green: contract-green,
                                                          cannot run: contract-error
  6. the diff applies cleanly (dry run)                -> else diff-rejected
  7. after applying, the node is green                 -> applied; otherwise every
     touched path is restored to its exact previous bytes -> reverted

Standard library only; pytest and GNU patch are run as subprocesses.
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

CONTRACTS_FILE = "contracts.json"
ALLOWLIST_FILE = "allowlist.txt"

DENIED_SEGMENTS = {"vendor", "node_modules", "third_party", "site-packages", "dist", "build", ".git"}
DENIED_SUFFIXES = (".pem", ".key", ".lock")
REFUSED_DIFF_HEADERS = ("rename from", "rename to", "copy from", "copy to", "old mode", "new mode",
                        "GIT binary patch", "Binary files")

PYTEST_TIMEOUT_SECS = 120


@dataclass(frozen=True)
class Result:
    code: str
    reason: str
    touched: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.code]


class _Refusal(Exception):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


# ----------------------------------------------------------------- proposal


def _no_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise _Refusal("bad-proposal", f"duplicate key {key!r}")
        seen[key] = value
    return seen


def load_proposal(proposal_path: str | os.PathLike) -> dict[str, str]:
    try:
        raw = Path(proposal_path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _Refusal("bad-proposal", f"cannot read proposal: {exc}") from None
    try:
        data = json.loads(raw, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise _Refusal("bad-proposal", f"proposal is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _Refusal("bad-proposal", "proposal must be a JSON object")
    extra = sorted(set(data) - set(REQUIRED_KEYS))
    missing = sorted(set(REQUIRED_KEYS) - set(data))
    if extra or missing:
        raise _Refusal("bad-proposal", f"key mismatch: extra={extra} missing={missing}")
    for key in REQUIRED_KEYS:
        if not isinstance(data[key], str) or not data[key].strip():
            raise _Refusal("bad-proposal", f"{key} must be a non-empty string")
    return data


# ----------------------------------------------------------------- paths


def _read_allowlist(repo: Path) -> list[str]:
    try:
        text = (repo / ALLOWLIST_FILE).read_text(encoding="utf-8")
    except OSError:
        return []  # no allowlist: nothing is allowed
    entries = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            entries.append(line)
    return entries


def _on_allowlist(rel: str, allow: list[str]) -> bool:
    for entry in allow:
        if entry.endswith("/"):
            if rel.startswith(entry):
                return True
        elif rel == entry:
            return True
    return False


def check_path(rel: str, allow: list[str]) -> None:
    """Refuse anything that is not a plain, relative, allowlisted path."""
    if not rel or "\\" in rel or "\x00" in rel:
        raise _Refusal("unsafe-path", f"malformed path {rel!r}")
    if rel.startswith(("/", "~")) or (len(rel) > 1 and rel[1] == ":"):
        raise _Refusal("unsafe-path", f"absolute path {rel!r}")
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise _Refusal("unsafe-path", f"path with an empty, '.' or '..' segment: {rel!r}")
    for part in parts:
        low = part.lower()
        if low in DENIED_SEGMENTS:
            raise _Refusal("unsafe-path", f"vendored or generated tree: {rel!r}")
        if "secret" in low or low.startswith(".env"):
            raise _Refusal("unsafe-path", f"secrets path: {rel!r}")
    if parts[-1].lower().endswith(DENIED_SUFFIXES):
        raise _Refusal("unsafe-path", f"key or lock file: {rel!r}")
    if not _on_allowlist(rel, allow):
        raise _Refusal("unsafe-path", f"path outside allowlist: {rel!r}")


def check_proposal_paths(proposal: dict[str, str], allow: list[str]) -> None:
    src, test = proposal["src_path"], proposal["test_path"]
    check_path(src, allow)
    check_path(test, allow)
    test_parts = test.split("/")
    if test_parts[0] != "tests" or not (test_parts[-1].startswith("test_") and test_parts[-1].endswith(".py")):
        raise _Refusal("unsafe-path", f"test_path must be a test module tests/**/test_*.py, got {test!r}")
    if not src.endswith(".py") or src.split("/")[0] == "tests":
        raise _Refusal("unsafe-path", f"src_path must be a Python module outside tests/, got {src!r}")
    if src == test:
        raise _Refusal("unsafe-path", "src_path and test_path must differ")


# ----------------------------------------------------------------- diff


def _header_path(line: str) -> str | None:
    """Path of a ---/+++ header line, without the a/ or b/ prefix (None for /dev/null)."""
    name = line[4:].split("\t", 1)[0].rstrip("\r\n")
    if name == "/dev/null":
        return None
    if name.startswith(("a/", "b/")):
        return name[2:]
    raise _Refusal("unsafe-path", f"diff path without an a/ or b/ prefix: {name!r}")


def diff_paths(diff: str) -> list[str]:
    """Every path the diff would write, checked header by header, hunks skipped by count."""
    lines = diff.splitlines()
    paths: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(REFUSED_DIFF_HEADERS):
            raise _Refusal("diff-rejected", f"renames, copies, mode changes and binaries are refused: {line!r}")
        if line.startswith("diff --git "):
            for token in line.split()[2:]:
                if not token.startswith(("a/", "b/")):
                    raise _Refusal("unsafe-path", f"diff path without an a/ or b/ prefix: {token!r}")
                paths.append(token[2:])
            i += 1
            continue
        if line.startswith("--- "):
            if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
                raise _Refusal("diff-rejected", "a '---' header without its '+++' line")
            old, new = _header_path(line), _header_path(lines[i + 1])
            if old is None and new is None:
                raise _Refusal("diff-rejected", "both sides are /dev/null")
            if old is not None and new is not None and old != new:
                raise _Refusal("unsafe-path", f"diff renames {old!r} to {new!r}")
            paths.extend(p for p in (old, new) if p is not None)
            i += 2
            while i < len(lines) and lines[i].startswith("@@"):
                old_n, new_n = _hunk_counts(lines[i])
                i += 1
                while (old_n > 0 or new_n > 0) and i < len(lines):
                    tag = lines[i][:1]
                    if tag == " " or lines[i] == "":
                        old_n -= 1
                        new_n -= 1
                    elif tag == "-":
                        old_n -= 1
                    elif tag == "+":
                        new_n -= 1
                    elif tag != "\\":
                        raise _Refusal("diff-rejected", f"hunk line {i + 1} is malformed")
                    i += 1
                while i < len(lines) and lines[i].startswith("\\"):
                    i += 1
            continue
        i += 1
    if not paths:
        raise _Refusal("diff-rejected", "no file headers in diff")
    return paths


def _hunk_counts(line: str) -> tuple[int, int]:
    try:
        ranges = line.split("@@")[1].split()
        old = ranges[0].lstrip("-").split(",")
        new = ranges[1].lstrip("+").split(",")
        return (int(old[1]) if len(old) > 1 else 1, int(new[1]) if len(new) > 1 else 1)
    except (IndexError, ValueError):
        raise _Refusal("diff-rejected", f"malformed hunk header {line!r}") from None


# ----------------------------------------------------------------- contract


def load_contracts(repo: Path) -> dict[str, str]:
    try:
        data = json.loads((repo / CONTRACTS_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def run_node(repo: Path, node: str) -> int:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    env.pop("PYTEST_ADDOPTS", None)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", node],
            cwd=repo, env=env, capture_output=True, text=True, timeout=PYTEST_TIMEOUT_SECS,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return -1
    return proc.returncode


def _patch(repo: Path, diff: str, dry_run: bool) -> subprocess.CompletedProcess:
    cmd = ["patch", "-p1", "--batch", "--forward", "--fuzz=0", "--no-backup-if-mismatch",
           "--reject-file=-", "--quiet"]
    if dry_run:
        cmd.append("--dry-run")
    return subprocess.run(cmd, cwd=repo, input=diff, capture_output=True, text=True, timeout=60)


# ----------------------------------------------------------------- snapshot


def _snapshot(repo: Path, paths: list[str]) -> dict[str, bytes | None]:
    snap: dict[str, bytes | None] = {}
    for rel in paths:
        target = repo / rel
        snap[rel] = target.read_bytes() if target.is_file() else None
    return snap


def _missing_dirs(repo: Path, paths: list[str]) -> list[Path]:
    missing = []
    for rel in paths:
        parent = (repo / rel).parent
        while parent != repo and not parent.exists():
            missing.append(parent)
            parent = parent.parent
    return missing


def _restore(repo: Path, snap: dict[str, bytes | None], created_dirs: list[Path]) -> None:
    for rel, content in snap.items():
        target = repo / rel
        if content is None:
            if target.exists() or target.is_symlink():
                target.unlink()
        else:
            target.write_bytes(content)
    for d in sorted(set(created_dirs), key=lambda p: len(p.parts), reverse=True):
        try:
            d.rmdir()
        except OSError:
            pass


# ----------------------------------------------------------------- the gate


def gate(proposal_path: str | os.PathLike, repo_root: str | os.PathLike) -> Result:
    repo = Path(repo_root).resolve()
    try:
        proposal = load_proposal(proposal_path)
        check_proposal_paths(proposal, _read_allowlist(repo))
        allowed = {proposal["src_path"], proposal["test_path"]}
        touched = list(dict.fromkeys(diff_paths(proposal["diff"])))
        for rel in touched:
            if rel not in allowed:
                raise _Refusal("unsafe-path", f"diff touches {rel!r}, which is neither src_path nor test_path")

        node = load_contracts(repo).get(proposal["behavior_id"])
        if not node:
            raise _Refusal("unknown-behavior", f"no contract test for {proposal['behavior_id']!r}")

        before = 1  # trust the agent: it says the contract is red
        if before == 0:
            raise _Refusal("contract-green", f"{node} already passes on the current tree; refusing the write")
        if before != 1:
            raise _Refusal("contract-error", f"{node} could not run (pytest exit {before})")

        if _patch(repo, proposal["diff"], dry_run=True).returncode != 0:
            raise _Refusal("diff-rejected", "the diff does not apply cleanly (dry run)")

        snap = _snapshot(repo, touched)
        created_dirs = _missing_dirs(repo, touched)
        applied = _patch(repo, proposal["diff"], dry_run=False)
        if applied.returncode != 0:
            _restore(repo, snap, created_dirs)
            raise _Refusal("diff-rejected", "the diff failed to apply; nothing kept")

        if run_node(repo, node) == 0:
            return Result("applied", f"{node} is green after the write", tuple(touched))
        _restore(repo, snap, created_dirs)
        return Result("reverted", f"{node} still red after the write; touched paths restored", tuple(touched))
    except _Refusal as refusal:
        return Result(refusal.code, refusal.reason)


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
