"""Contract gate for agent-proposed writes.

No write without a red contract: a proposal is applied only when the contract
test mapped to its behaviour fails on the current tree and passes after the
write. Otherwise the repository is left (or put back) exactly as it was.

The checks, in order (the first failure decides):

    document -> paths -> diff paths -> behaviour -> red on HEAD -> dry run + apply -> rerun

Standard library only; the diff is applied with ``git apply`` (which also works
outside a git repository), or with GNU ``patch`` when git is not installed.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
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

FORBIDDEN_DIRS = frozenset({"vendor", "node_modules", "third_party", "site-packages", "dist", "build", ".git"})
FORBIDDEN_EXTENSIONS = (".pem", ".key", ".lock")
PYTEST_TIMEOUT_SECONDS = 120
APPLY_TIMEOUT_SECONDS = 60
HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
GIT_EXTENDED = ("old mode", "new mode", "deleted file mode", "similarity index",
                "dissimilarity index", "rename from", "rename to", "copy from", "copy to")


@dataclass(frozen=True)
class Result:
    code: str
    reason: str
    touched: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.code]


class Stop(Exception):
    """Raised by a check: the gate answers with this code and reason."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, " ".join(reason.split())


# ---------------------------------------------------------------------------
# 1. the document


def _reject_duplicate_keys(pairs: list[tuple[str, object]]) -> dict:
    keys = [k for k, _ in pairs]
    doubled = sorted({k for k in keys if keys.count(k) > 1})
    if doubled:
        raise Stop("bad-proposal", f"duplicate key(s) in the proposal: {', '.join(doubled)}")
    return dict(pairs)


def read_document(proposal_path: str | os.PathLike) -> dict[str, str]:
    try:
        raw = Path(proposal_path).read_bytes()
    except OSError as exc:
        raise Stop("bad-proposal", f"cannot read {proposal_path}: {exc.strerror or exc}")
    try:
        text = raw.decode("utf-8")
        document = json.loads(text, object_pairs_hook=_reject_duplicate_keys)
    except UnicodeDecodeError:
        raise Stop("bad-proposal", "the proposal is not UTF-8")
    except json.JSONDecodeError as exc:
        raise Stop("bad-proposal", f"the proposal is not a JSON document ({exc.msg} at line {exc.lineno})")
    if not isinstance(document, dict):
        raise Stop("bad-proposal", f"the proposal must be a JSON object, not {type(document).__name__}")
    keys = set(document)
    if keys != set(REQUIRED_KEYS):
        missing = [k for k in REQUIRED_KEYS if k not in keys]
        extra = sorted(keys - set(REQUIRED_KEYS))
        parts = []
        if missing:
            parts.append("missing " + ", ".join(missing))
        if extra:
            parts.append("unexpected " + ", ".join(extra))
        raise Stop("bad-proposal", "the proposal must have exactly the keys "
                   + ", ".join(REQUIRED_KEYS) + ": " + "; ".join(parts))
    for key in REQUIRED_KEYS:
        value = document[key]
        if not isinstance(value, str) or value == "":
            raise Stop("bad-proposal", f"{key} must be a non-empty string")
    return document


# ---------------------------------------------------------------------------
# 2. the two named paths


def load_allowlist(repo: Path) -> list[str]:
    try:
        text = (repo / "allowlist.txt").read_text(encoding="utf-8")
    except OSError:
        return []
    entries = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            entries.append(line)
    return entries


def on_allowlist(rel: str, entries: list[str]) -> bool:
    return any(rel.startswith(e) if e.endswith("/") else rel == e for e in entries)


def path_problem(rel: str, entries: list[str]) -> str | None:
    """Why `rel` may not be written, or None when it may."""
    if os.path.isabs(rel) or rel.startswith("/") or re.match(r"^[A-Za-z]:", rel):
        return "is absolute"
    if "\\" in rel:
        return "contains a backslash"
    segments = rel.split("/")
    for segment in segments:
        if segment in ("", ".", ".."):
            return "has an empty, '.' or '..' segment"
        lowered = segment.lower()
        if lowered in FORBIDDEN_DIRS:
            return f"goes through {segment!r}"
        if "secret" in lowered:
            return "names a secret"
        if lowered.startswith(".env"):
            return "names an environment file"
    if segments[-1].lower().endswith(FORBIDDEN_EXTENSIONS):
        return "is a key, certificate or lock file"
    if not on_allowlist(rel, entries):
        return "is not on allowlist.txt"
    return None


def leaves_repository(repo: Path, rel: str) -> bool:
    """True when `rel` (or a folder on the way) is a symlink that points outside the repository."""
    root = repo.resolve()
    resolved = (repo / rel).resolve()
    return resolved != root and root not in resolved.parents


def check_paths(repo: Path, src: str, test: str) -> None:
    entries = load_allowlist(repo)
    for label, rel in (("src_path", src), ("test_path", test)):
        problem = path_problem(rel, entries)
        if problem is None and leaves_repository(repo, rel):
            problem = "resolves outside the repository"
        if problem:
            raise Stop("unsafe-path", f"{label} {rel!r} {problem}")
    test_segments = test.split("/")
    if test_segments[0] != "tests" or len(test_segments) < 2 \
            or not re.fullmatch(r"test_.*\.py", test_segments[-1]):
        raise Stop("unsafe-path", f"test_path {test!r} is not a test module (tests/**/test_*.py)")
    if not src.endswith(".py") or src.split("/")[0] == "tests":
        raise Stop("unsafe-path", f"src_path {src!r} must be a .py module outside tests/")
    if src == test:
        raise Stop("unsafe-path", "src_path and test_path name the same file")


# ---------------------------------------------------------------------------
# 3. what the diff names


@dataclass
class FilePatch:
    old: str
    new: str
    extended: list[str] = field(default_factory=list)
    hunks: int = 0

    @property
    def path(self) -> str:
        return self.new if self.new != "/dev/null" else self.old


def _header_path(value: str, prefix: str) -> str:
    value = value.split("\t", 1)[0].rstrip("\r")
    if value == "/dev/null":
        return value
    if not value.startswith(prefix):
        raise Stop("diff-rejected", f"file header {value!r} does not start with {prefix!r}")
    return value[len(prefix):]


def parse_diff(diff: str) -> tuple[list[FilePatch], set[str]]:
    """Walk the diff hunk by hunk. Returns the file patches and every path any line names."""
    lines = diff.splitlines()
    patches: list[FilePatch] = []
    named: set[str] = set()
    pending_extended: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            for token in line.split()[2:]:
                named.add(token[2:] if token.startswith(("a/", "b/")) else token)
            pending_extended = []
            i += 1
            continue
        if line.startswith(GIT_EXTENDED) or line.startswith(("Binary files ", "GIT binary patch")):
            pending_extended.append(line)
            for word in ("rename from ", "rename to ", "copy from ", "copy to "):
                if line.startswith(word):
                    named.add(line[len(word):].strip())
            i += 1
            continue
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            current = FilePatch(_header_path(line[4:], "a/"), _header_path(lines[i + 1][4:], "b/"),
                                extended=pending_extended)
            pending_extended = []
            named.update(p for p in (current.old, current.new) if p != "/dev/null")
            patches.append(current)
            i += 2
            while i < len(lines):
                match = HUNK_HEADER.match(lines[i])
                if not match:
                    break
                old_left = int(match.group(2) or 1)
                new_left = int(match.group(4) or 1)
                current.hunks += 1
                i += 1
                while (old_left > 0 or new_left > 0) and i < len(lines):
                    body = lines[i]
                    if body.startswith("\\"):
                        i += 1
                        continue
                    tag = body[:1]
                    if tag in (" ", ""):
                        old_left -= 1
                        new_left -= 1
                    elif tag == "-":
                        old_left -= 1
                    elif tag == "+":
                        new_left -= 1
                    else:
                        raise Stop("diff-rejected", f"malformed hunk line {body[:40]!r}")
                    i += 1
                while i < len(lines) and lines[i].startswith("\\"):
                    i += 1
            continue
        if patches and line.strip() and not line.startswith(("index ", "new file mode ")):
            # Text between two file parts (a model's prose, a stray line): not a diff we trust.
            raise Stop("diff-rejected", f"line {i + 1} is outside any file part: {line[:40]!r}")
        i += 1
    if pending_extended:
        patches.append(FilePatch("/dev/null", "/dev/null", extended=pending_extended))
    return patches, named


def check_diff(diff: str, src: str, test: str) -> tuple[str, ...]:
    # Shape first (a diff we cannot read whole is refused as a diff), then what it names.
    patches, named = parse_diff(diff)
    real = [p for p in patches if p.old != "/dev/null" or p.new != "/dev/null"]
    if not real:
        raise Stop("diff-rejected", "the diff has no --- a/ / +++ b/ file headers")
    for file_patch in patches:
        if file_patch.extended:
            raise Stop("diff-rejected", f"refused diff part: {file_patch.extended[0]!r} "
                       "(renames, copies, mode changes and binary parts are not accepted)")
        if file_patch.new == "/dev/null":
            raise Stop("diff-rejected", f"the diff deletes {file_patch.old}")
        if file_patch.old != "/dev/null" and file_patch.old != file_patch.new:
            raise Stop("diff-rejected", f"the diff renames {file_patch.old} to {file_patch.new}")
        if file_patch.hunks == 0:
            raise Stop("diff-rejected", f"the diff has no hunk for {file_patch.path}")
    strays = sorted(named - {src, test})
    if strays:
        raise Stop("unsafe-path", "the diff names paths other than src_path and test_path: "
                   + ", ".join(strays))
    return tuple(dict.fromkeys(p.path for p in real))


# ---------------------------------------------------------------------------
# 4-7. behaviour, red, apply, rerun


def contract_node(repo: Path, behavior_id: str) -> str:
    try:
        contracts = json.loads((repo / "contracts.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise Stop("unknown-behavior", f"contracts.json is unreadable ({exc}); no behaviour is known")
    if not isinstance(contracts, dict) or behavior_id not in contracts:
        raise Stop("unknown-behavior", f"behavior_id {behavior_id!r} has no contract in contracts.json")
    node = contracts[behavior_id]
    if not isinstance(node, str) or not node.strip():
        raise Stop("contract-error", f"contracts.json maps {behavior_id!r} to {node!r}, not a node id")
    return node


def run_contract(repo: Path, node: str) -> str:
    """'green', 'red' or 'error: ...' for one run of the node."""
    env = os.environ.copy()
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", node],
            cwd=repo, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=PYTEST_TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        return f"error: timed out after {PYTEST_TIMEOUT_SECONDS}s"
    if done.returncode == 0:
        return "green"
    if done.returncode == 1:
        return "red"
    tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or [""]
    return f"error: pytest exit {done.returncode} {tail[0][:160]}"


def _apply_command(repo: Path, check_only: bool) -> tuple[list[str], dict]:
    env = os.environ.copy()
    if shutil.which("git"):
        # Outside a repository git apply works like patch; never let it find a parent repository.
        env.update(GIT_CEILING_DIRECTORIES=str(repo.resolve().parent), GIT_CONFIG_NOSYSTEM="1",
                   GIT_CONFIG_GLOBAL=os.devnull, GIT_ATTR_NOSYSTEM="1")
        argv = ["git", "apply", "-p1", "--whitespace=nowarn"]
        if check_only:
            argv.append("--check")
        return argv + ["-"], env
    argv = ["patch", "-p1", "--batch", "--forward", "--fuzz=0", "--no-backup-if-mismatch",
            "--reject-file=-", "--silent"]
    if check_only:
        argv.append("--dry-run")
    return argv, env


def apply_diff(repo: Path, diff: str, check_only: bool) -> tuple[bool, str]:
    argv, env = _apply_command(repo, check_only)
    if not diff.endswith("\n"):
        diff += "\n"
    try:
        done = subprocess.run(argv, cwd=repo, env=env, input=diff, capture_output=True, text=True,
                              timeout=APPLY_TIMEOUT_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return done.returncode == 0, (done.stderr or done.stdout).strip()


class Snapshot:
    """Exact bytes of the touched paths just before the write (None: the path did not exist)."""

    def __init__(self, repo: Path, paths: tuple[str, ...]) -> None:
        self.repo = repo
        self.saved = {}
        self.missing_dirs = {}
        for rel in paths:
            target = repo / rel
            self.saved[rel] = target.read_bytes() if target.is_file() else None
            first_missing = None
            parent = target.parent
            while parent != repo and not parent.exists():
                first_missing = parent
                parent = parent.parent
            self.missing_dirs[rel] = first_missing

    def restore(self) -> None:
        for rel, data in self.saved.items():
            target = self.repo / rel
            if data is None:
                if target.is_file() or target.is_symlink():
                    target.unlink()
                created = self.missing_dirs[rel]
                if created is not None and created.is_dir():
                    shutil.rmtree(created)
            else:
                target.write_bytes(data)


def gate(proposal_path: str | os.PathLike, repo_root: str | os.PathLike) -> Result:
    repo = Path(repo_root)
    try:
        document = read_document(proposal_path)
        src, test, diff = document["src_path"], document["test_path"], document["diff"]
        check_paths(repo, src, test)
        touched = check_diff(diff, src, test)
        node = contract_node(repo, document["behavior_id"])

        state = run_contract(repo, node)
        if state == "green":
            raise Stop("contract-green", f"{node} already passes on HEAD: the write is unproven")
        if state != "red":
            raise Stop("contract-error", f"{node} could not be run on HEAD ({state})")

        snapshot = Snapshot(repo, touched)
        ok, why = apply_diff(repo, diff, check_only=True)
        if not ok:
            raise Stop("diff-rejected", f"the diff does not apply cleanly: {why[:200]}")
        ok, why = apply_diff(repo, diff, check_only=False)
        if not ok:
            snapshot.restore()
            raise Stop("diff-rejected", f"applying the diff failed; restored: {why[:200]}")

        state = run_contract(repo, node)
        if state == "green":
            return Result("applied", f"{node} went red -> green; wrote {', '.join(touched)}", touched)
        snapshot.restore()
        return Result("reverted", f"{node} is still not green after the write ({state}); "
                      f"restored {', '.join(touched)}", touched)
    except Stop as stop:
        return Result(stop.code, stop.reason)


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
