"""Contract gate for agent-proposed writes.

Pipeline (the first step that objects decides the result; nothing is written
unless step 6 is reached):

  1 document   -> bad-proposal
  2 paths      -> unsafe-path           (before the diff is even looked at)
  3 diff paths -> unsafe-path / diff-rejected
  4 behaviour  -> unknown-behavior
  5 red on HEAD-> contract-green / contract-error
  6 dry run    -> diff-rejected, then the write
  7 rerun      -> applied, or every touched path restored -> reverted

    python3 agent_contract.py PROPOSAL.json [REPO_ROOT]
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
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


BLOCKED_DIRS = ("vendor", "node_modules", "third_party", "site-packages", "dist", "build", ".git")
BLOCKED_ENDINGS = (".pem", ".key", ".lock")
CONTRACT_TIMEOUT = 120.0
PATCH_TIMEOUT = 60.0

# Installed as sitecustomize for the contract run: refuse non-loopback sockets.
_SITECUSTOMIZE = """\
import socket as _s

_LOOPBACK = ("127.", "::1", "localhost")


def _is_loopback(host):
    return host is None or str(host) == "" or str(host).startswith(_LOOPBACK)


def _guard(original):
    def connect(self, address):
        if self.family in (_s.AF_INET, _s.AF_INET6) and not _is_loopback(address[0]):
            raise OSError("contract gate: no network during the contract run")
        return original(self, address)
    return connect


_s.socket.connect = _guard(_s.socket.connect)
_s.socket.connect_ex = _guard(_s.socket.connect_ex)
_real_getaddrinfo = _s.getaddrinfo


def _getaddrinfo(host, *args, **kwargs):
    if not _is_loopback(host):
        raise OSError("contract gate: no network during the contract run")
    return _real_getaddrinfo(host, *args, **kwargs)


_s.getaddrinfo = _getaddrinfo
"""


def _say(text: object) -> str:
    """Squash anything into one short line."""
    words = " ".join(str(text).split())
    return words[:297] + "..." if len(words) > 300 else words


def _refuse(code: str, reason: object) -> Result:
    return Result(code, _say(reason))


# ---------------------------------------------------------------- step 1

def _no_duplicates(pairs):
    keys = [key for key, _ in pairs]
    for key in keys:
        if keys.count(key) > 1:
            raise KeyError(key)
    return dict(pairs)


def read_proposal(proposal_path) -> tuple[dict | None, Result | None]:
    try:
        raw = Path(proposal_path).read_bytes()
    except OSError as exc:
        return None, _refuse("bad-proposal", f"proposal unreadable ({exc.__class__.__name__}: {exc.strerror or exc})")
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        return None, _refuse("bad-proposal", f"proposal is not UTF-8 (byte {exc.start})")
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates)
    except KeyError as exc:
        return None, _refuse("bad-proposal", f"duplicate key {exc.args[0]!r}: which one would be written?")
    except (ValueError, RecursionError) as exc:
        return None, _refuse("bad-proposal", f"proposal is not a JSON document ({exc})")
    if not isinstance(doc, dict):
        return None, _refuse("bad-proposal", "proposal must be one JSON object")
    unknown = [key for key in doc if key not in REQUIRED_KEYS]
    if unknown:
        return None, _refuse("bad-proposal", f"unexpected field(s) {unknown}: send exactly {list(REQUIRED_KEYS)}")
    absent = [key for key in REQUIRED_KEYS if key not in doc]
    if absent:
        return None, _refuse("bad-proposal", f"field(s) {absent} missing")
    bad_values = [key for key in REQUIRED_KEYS if not isinstance(doc[key], str) or not doc[key]]
    if bad_values:
        return None, _refuse("bad-proposal", f"field(s) {bad_values} must be non-empty strings")
    return doc, None


# ---------------------------------------------------------------- step 2

def load_allowlist(repo: Path) -> list[str]:
    try:
        lines = (repo / "allowlist.txt").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []  # fail closed
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def on_allowlist(path: str, allowlist: list[str]) -> bool:
    return any(path.startswith(entry) if entry.endswith("/") else path == entry for entry in allowlist)


def general_path_problem(path: str, allowlist: list[str], repo: Path) -> str | None:
    if any(ch < " " or ch == "\x7f" for ch in path):
        return "has control characters"
    if path.startswith("/") or re.match(r"[A-Za-z]:", path) or path.startswith("~"):
        return "is absolute (paths are relative to the repo root)"
    if "\\" in path:
        return "has a backslash"
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            return "has an empty, '.' or '..' part"
    for part in parts:
        low = part.lower()
        if low in BLOCKED_DIRS:
            return f"passes through {part!r}"
        if "secret" in low:
            return "looks like a secret"
        if low.startswith(".env"):
            return "looks like an env file"
    if parts[-1].lower().endswith(BLOCKED_ENDINGS):
        return "is a key/cert/lock file"
    if not on_allowlist(path, allowlist):
        return "is not allowed by allowlist.txt"
    here = repo
    for part in parts:
        here = here / part
        if here.is_symlink():
            return "runs through a symlink"
    return None


def check_paths(src_path: str, test_path: str, repo: Path) -> Result | None:
    allowlist = load_allowlist(repo)
    for label, path in (("src_path", src_path), ("test_path", test_path)):
        problem = general_path_problem(path, allowlist, repo)
        if problem:
            return _refuse("unsafe-path", f"{label} {path!r} {problem}")
    if src_path.split("/")[0] == "tests":
        return _refuse("unsafe-path", f"src_path {src_path!r} must live outside tests/")
    if not src_path.endswith(".py"):
        return _refuse("unsafe-path", f"src_path {src_path!r} must be a Python file")
    test_parts = test_path.split("/")
    name = test_parts[-1]
    if len(test_parts) < 2 or test_parts[0] != "tests":
        return _refuse("unsafe-path", f"test_path {test_path!r} must live under tests/")
    if not (name.startswith("test_") and name.endswith(".py")):
        return _refuse("unsafe-path", f"test_path {test_path!r} is not a test_*.py module")
    if src_path == test_path:
        return _refuse("unsafe-path", "src_path and test_path must be different files")
    return None


# ---------------------------------------------------------------- step 3

HUNK_HEADER = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
NOT_A_PLAIN_EDIT = (
    ("rename from ", "rename"), ("rename to ", "rename"), ("copy from ", "copy"), ("copy to ", "copy"),
    ("similarity index", "rename/copy"), ("dissimilarity index", "rewrite"),
    ("old mode ", "mode change"), ("new mode ", "mode change"),
    ("GIT binary patch", "binary part"), ("Binary files ", "binary part"),
)


def _header_path(rest: str, prefix: str) -> str:
    """What `patch -p1` makes of a ---/+++ header ('/dev/null' kept as is)."""
    words = rest.split("\t")[0].split()
    word = words[0] if words else ""
    if word == "/dev/null":
        return word
    if word.startswith(prefix):
        return word[len(prefix):]
    return "<" + word + " without " + prefix + ">"


def scan_diff(diff: str) -> tuple[list[tuple[str, str]], set[str], list[str]]:
    """Returns (file sections as (old, new), every path named, problems)."""
    sections: list[tuple[str, str]] = []
    hunks: list[int] = []
    named: set[str] = set()
    problems: list[str] = []
    if "\0" in diff:
        problems.append("binary part")
    lines = [line[:-1] if line.endswith("\r") else line for line in diff.split("\n")]
    old_left = new_left = 0
    pos = 0
    while pos < len(lines):
        line = lines[pos]
        pos += 1
        if old_left > 0 or new_left > 0:
            marker = line[:1]
            if marker in (" ", ""):
                old_left, new_left = old_left - 1, new_left - 1
                continue
            if marker == "-":
                old_left -= 1
                continue
            if marker == "+":
                new_left -= 1
                continue
            if marker == "\\":
                continue
            old_left = new_left = 0  # short hunk; patch's dry run will say so
        if line.startswith("--- "):
            if pos >= len(lines) or not lines[pos].startswith("+++ "):
                problems.append("'---' header with no '+++' after it")
                continue
            old = _header_path(line[4:], "a/")
            new = _header_path(lines[pos][4:], "b/")
            pos += 1
            named.update(name for name in (old, new) if name != "/dev/null")
            if old == new == "/dev/null":
                problems.append("header with /dev/null on both sides")
            elif "/dev/null" not in (old, new) and old != new:
                problems.append(f"rename {old} -> {new}")
            sections.append((old, new))
            hunks.append(0)
        elif line.startswith("+++ "):
            problems.append("'+++' header with no '---' before it")
        elif line.startswith("@@"):
            match = HUNK_HEADER.match(line)
            if not match:
                problems.append("malformed hunk header")
            elif not sections:
                problems.append("hunk with no file header")
            else:
                hunks[-1] += 1
                old_left = 1 if match.group(1) is None else int(match.group(1))
                new_left = 1 if match.group(2) is None else int(match.group(2))
        elif line.startswith("diff --git "):
            pair = line[len("diff --git "):].split(" ")
            if len(pair) == 2 and pair[0].startswith("a/") and pair[1].startswith("b/"):
                named.update((pair[0][2:], pair[1][2:]))
                if pair[0][2:] != pair[1][2:]:
                    problems.append(f"rename {pair[0][2:]} -> {pair[1][2:]}")
            else:
                named.add("<unparsable diff --git line>")
        elif line.startswith("Index: "):
            name = line[len("Index: "):].strip()
            named.add(name[2:] if name.startswith(("a/", "b/")) else name)
        elif line.startswith(("new file mode ", "deleted file mode ")):
            if not line.endswith(" 100644"):
                problems.append("file created or deleted with a special mode")
        else:
            for start, kind in NOT_A_PLAIN_EDIT:
                if line.startswith(start):
                    problems.append(kind)
                    if start.startswith(("rename", "copy")):
                        named.add(line[len(start):].strip())
                    break
    for (old, new), count in zip(sections, hunks):
        if count == 0:
            problems.append(f"no hunk for {new if new != '/dev/null' else old}")
    return sections, named, problems


def check_diff(diff: str, src_path: str, test_path: str) -> tuple[tuple[str, ...], Result | None]:
    sections, named, problems = scan_diff(diff)
    strangers = sorted(named - {src_path, test_path})
    if strangers:
        return (), _refuse("unsafe-path", f"diff writes {strangers[0]!r}; only src_path and test_path may be touched")
    if problems:
        return (), _refuse("diff-rejected", f"diff is not a plain content edit: {problems[0]}")
    if not sections:
        return (), _refuse("diff-rejected", "diff has no ---/+++ file headers")
    targets = tuple(new if new != "/dev/null" else old for old, new in sections)
    if len(set(targets)) < len(targets):
        return (), _refuse("diff-rejected", "diff has two sections for one file")
    return targets, None


# ---------------------------------------------------------------- step 4

def contract_node(repo: Path, behavior_id: str) -> tuple[str | None, Result | None]:
    try:
        table = json.loads((repo / "contracts.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, _refuse("unknown-behavior", f"no usable contracts.json ({exc})")
    if not isinstance(table, dict) or behavior_id not in table:
        return None, _refuse("unknown-behavior", f"no contract for behavior {behavior_id!r}")
    node = table[behavior_id]
    if not isinstance(node, str) or not node.strip() or node.startswith("-"):
        return None, _refuse("contract-error", f"contract for {behavior_id!r} is not a pytest node id: {node!r}")
    return node, None


# ------------------------------------------------------------- steps 5, 7

def run_contract(repo: Path, node: str) -> tuple[int | None, str]:
    """pytest's exit status for the node alone (None when it could not finish)."""
    with tempfile.TemporaryDirectory(prefix="gate-site-") as site:
        Path(site, "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
        env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
        env["PYTHONPATH"] = site + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", node],
                cwd=repo, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, timeout=CONTRACT_TIMEOUT)
        except subprocess.TimeoutExpired:
            return None, f"timed out after {CONTRACT_TIMEOUT:.0f}s"
        except OSError as exc:
            return None, f"pytest would not start: {exc}"
    output = proc.stdout.decode("utf-8", "replace").strip().splitlines()
    return proc.returncode, (output[-1] if output else "(no output)")


# ---------------------------------------------------------------- step 6

def run_patch(repo: Path, diff: str, dry_run: bool) -> tuple[bool, str]:
    try:
        data = diff.encode("utf-8")
    except UnicodeEncodeError:
        return False, "diff cannot be encoded as UTF-8"
    env = {key: value for key, value in os.environ.items()
           if key not in ("POSIXLY_CORRECT", "PATCH_GET", "VERSION_CONTROL", "PATCH_VERSION_CONTROL",
                          "SIMPLE_BACKUP_SUFFIX")}
    with tempfile.TemporaryDirectory(prefix="gate-diff-") as scratch:
        diff_file = Path(scratch, "proposal.diff")
        diff_file.write_bytes(data)
        argv = ["patch", "--strip=1", "--unified", "--batch", "--forward", "--fuzz=0", "--get=0",
                "--no-backup-if-mismatch", "--reject-file=-", "--input", str(diff_file)]
        if dry_run:
            argv.append("--dry-run")
        try:
            proc = subprocess.run(argv, cwd=repo, env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=PATCH_TIMEOUT)
        except subprocess.TimeoutExpired:
            return False, "patch timed out"
        except OSError as exc:
            return False, f"patch is not available: {exc}"
    return proc.returncode == 0, proc.stdout.decode("utf-8", "replace")


def remember(repo: Path, touched: tuple[str, ...]) -> dict:
    """Bytes and mode of each touched path as it is now (None = absent), plus
    the folders and patch side files that do not exist yet."""
    memo = {"files": {}, "new_dirs": set(), "side_files": []}
    for rel in touched:
        target = repo / rel
        memo["files"][rel] = (target.read_bytes(), target.stat().st_mode) if target.is_file() else None
        folder = target.parent
        while folder != repo and not folder.exists():
            memo["new_dirs"].add(folder)
            folder = folder.parent
        for extra in (".orig", ".rej"):
            side = target.parent / (target.name + extra)
            if not side.exists():
                memo["side_files"].append(side)
    return memo


def put_back(repo: Path, memo: dict) -> None:
    for rel, before in memo["files"].items():
        target = repo / rel
        if before is None:
            if target.exists() or target.is_symlink():
                target.unlink()
        else:
            data, mode = before
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(mode & 0o7777)
    for side in memo["side_files"]:
        if side.is_file():
            side.unlink()
    for folder in sorted(memo["new_dirs"], key=lambda p: -len(p.parts)):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


# ------------------------------------------------------------------ gate

def gate(proposal_path: str | os.PathLike, repo_root: str | os.PathLike) -> Result:
    repo = Path(repo_root)

    doc, refusal = read_proposal(proposal_path)
    if refusal:
        return refusal
    refusal = check_paths(doc["src_path"], doc["test_path"], repo)
    if refusal:
        return refusal
    touched, refusal = check_diff(doc["diff"], doc["src_path"], doc["test_path"])
    if refusal:
        return refusal
    node, refusal = contract_node(repo, doc["behavior_id"])
    if refusal:
        return refusal

    status, summary = run_contract(repo, node)
    if status == 0:
        return _refuse("contract-green", f"{node} already passes before the write ({summary}); nothing to prove")
    if status != 1:
        shown = "no exit status" if status is None else f"exit status {status}"
        return _refuse("contract-error", f"{node} could not be run as a contract ({shown}: {summary})")

    ok, output = run_patch(repo, doc["diff"], dry_run=True)
    if not ok:
        return _refuse("diff-rejected", f"dry run failed, nothing written: {output}")

    memo = remember(repo, touched)
    try:
        ok, output = run_patch(repo, doc["diff"], dry_run=False)
        if not ok:
            put_back(repo, memo)
            return _refuse("diff-rejected", f"patch failed after a clean dry run, files put back: {output}")
        status, summary = run_contract(repo, node)
    except BaseException as exc:
        put_back(repo, memo)
        if isinstance(exc, Exception):
            return Result("reverted", _say(f"gate error after the write, files put back: {exc!r}"), touched)
        raise
    if status == 0:
        return Result("applied", _say(f"{node} red before, green after; wrote {', '.join(touched)}"), touched)
    put_back(repo, memo)
    return Result("reverted", _say(f"{node} still not green after the write ({summary}); "
                                   f"put back {', '.join(touched)}"), touched)


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
