"""Contract gate for agent-proposed writes.

A proposal (one JSON object: behavior_id, src_path, test_path, diff) is only
written to the repository when the contract test mapped to `behavior_id` is
red before the write and green after it. Every other outcome leaves the
repository byte-for-byte as it was. The checks run in the order PROMPT.md
gives; the first one that fails decides the result code.

    python3 agent_contract.py PROPOSAL.json [REPO_ROOT]
"""
from __future__ import annotations

import enum
import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile
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

FORBIDDEN_SEGMENTS = frozenset(
    {"vendor", "node_modules", "third_party", "site-packages", "dist", "build", ".git"}
)
FORBIDDEN_SUFFIXES = (".pem", ".key", ".lock")
PYTEST_TIMEOUT_SECONDS = 120
PATCH_TIMEOUT_SECONDS = 60

# GNU patch, unified diffs only (no ed scripts), strip one component, never
# reverse a hunk that looks reversed, no fuzz, no backup or reject files.
PATCH_COMMAND = (
    "patch", "-p1", "-u", "--batch", "--forward", "--fuzz=0", "--get=0",
    "--no-backup-if-mismatch", "--reject-file=-", "--quoting-style=literal",
)

# Loaded into the contract run through PYTEST_PLUGINS: only loopback sockets.
NO_NETWORK_PLUGIN = '''\
import socket

_LOCAL = {"127.0.0.1", "::1", "localhost", ""}
_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex
_getaddrinfo = socket.getaddrinfo


def _allowed(sock, address):
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return True
    host = address[0] if isinstance(address, tuple) and address else ""
    return str(host) in _LOCAL


def connect(self, address):
    if not _allowed(self, address):
        raise OSError("network is disabled while the contract gate runs tests")
    return _connect(self, address)


def connect_ex(self, address):
    if not _allowed(self, address):
        raise OSError("network is disabled while the contract gate runs tests")
    return _connect_ex(self, address)


def getaddrinfo(host, *args, **kwargs):
    if host is not None and str(host) not in _LOCAL and not str(host).startswith("127."):
        raise OSError("network is disabled while the contract gate runs tests")
    return _getaddrinfo(host, *args, **kwargs)


socket.socket.connect = connect
socket.socket.connect_ex = connect_ex
socket.getaddrinfo = getaddrinfo
'''


@dataclass(frozen=True)
class Result:
    code: str
    reason: str
    touched: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.code]


class Refused(Exception):
    """Raised by a check; carries the result code and a one-line reason."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = one_line(reason)

    def result(self, touched: tuple[str, ...] = ()) -> Result:
        return Result(self.code, self.reason, touched)


def one_line(text: object, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# --------------------------------------------------------------- 1. document

class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _pairs_without_duplicates(pairs: list[tuple[str, object]]) -> dict:
    seen: dict[str, object] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


@dataclass(frozen=True)
class Proposal:
    behavior_id: str
    src_path: str
    test_path: str
    diff: str

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Proposal":
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            raise Refused("bad-proposal", f"cannot read the proposal: {exc.strerror or exc}")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise Refused("bad-proposal", "the proposal is not UTF-8 text")
        try:
            document = json.loads(text, object_pairs_hook=_pairs_without_duplicates)
        except _DuplicateKey as exc:
            raise Refused("bad-proposal", f"key {exc.key!r} appears more than once")
        except (ValueError, RecursionError) as exc:
            raise Refused("bad-proposal", f"the proposal is not one JSON document: {exc}")
        if not isinstance(document, dict):
            raise Refused("bad-proposal", f"the proposal must be a JSON object, got {type(document).__name__}")
        missing = [key for key in REQUIRED_KEYS if key not in document]
        extra = sorted(key for key in document if key not in REQUIRED_KEYS)
        if missing:
            raise Refused("bad-proposal", f"missing key(s): {', '.join(missing)}")
        if extra:
            raise Refused("bad-proposal", f"unexpected key(s): {', '.join(map(repr, extra))}; "
                          f"only {', '.join(REQUIRED_KEYS)} are allowed")
        for key in REQUIRED_KEYS:
            value = document[key]
            if not isinstance(value, str) or value == "":
                raise Refused("bad-proposal", f"{key} must be a non-empty string")
        return cls(**{key: document[key] for key in REQUIRED_KEYS})


# ------------------------------------------------------------------ 2. paths

class PathPolicy:
    """The repository's allowlist plus the fixed rules for src_path and test_path."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.entries = self._read_allowlist(repo / "allowlist.txt")

    @staticmethod
    def _read_allowlist(path: Path) -> tuple[str, ...]:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return ()  # no readable allowlist: nothing is allowed
        entries = []
        for line in text.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                entries.append(line)
        return tuple(entries)

    def allows(self, path: str) -> bool:
        for entry in self.entries:
            if entry.endswith("/") and path.startswith(entry):
                return True
            if path == entry:
                return True
        return False

    def check(self, src_path: str, test_path: str) -> None:
        self._check_common("src_path", src_path)
        self._check_common("test_path", test_path)
        src = src_path.split("/")
        if src[0] == "tests":
            raise Refused("unsafe-path", f"src_path {src_path!r} is inside tests/")
        if not src[-1].endswith(".py"):
            raise Refused("unsafe-path", f"src_path {src_path!r} is not a .py file")
        test = test_path.split("/")
        if len(test) < 2 or test[0] != "tests":
            raise Refused("unsafe-path", f"test_path {test_path!r} is not under tests/")
        if not fnmatch.fnmatchcase(test[-1], "test_*.py"):
            raise Refused("unsafe-path", f"test_path {test_path!r} is not a test module (test_*.py)")
        if src_path == test_path:
            raise Refused("unsafe-path", "src_path and test_path are the same file")

    def _check_common(self, label: str, path: str) -> None:
        def refuse(why: str) -> Refused:
            return Refused("unsafe-path", f"{label} {path!r} {why}")

        if any(ord(ch) < 32 or ord(ch) == 127 for ch in path):
            raise refuse("contains control characters")
        if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
            raise refuse("is absolute; give it relative to the repository root")
        if "\\" in path:
            raise refuse("contains a backslash")
        segments = path.split("/")
        if any(segment in ("", ".", "..") for segment in segments):
            raise refuse("has an empty, '.' or '..' segment")
        for segment in segments:
            lowered = segment.lower()
            if lowered in FORBIDDEN_SEGMENTS:
                raise refuse(f"goes through {segment!r}, which is never writable")
            if "secret" in lowered:
                raise refuse("names a secret")
            if lowered.startswith(".env"):
                raise refuse("names an environment file")
        if segments[-1].lower().endswith(FORBIDDEN_SUFFIXES):
            raise refuse("is a key, certificate or lock file")
        if not self.allows(path):
            raise refuse("is not on the repository's allowlist.txt")
        for depth in range(1, len(segments) + 1):
            if self.repo.joinpath(*segments[:depth]).is_symlink():
                raise refuse("goes through a symbolic link")


# ------------------------------------------------------------------- 3. diff

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_REJECTED_LINES = {
    "rename from ": "renames a file",
    "rename to ": "renames a file",
    "copy from ": "copies a file",
    "copy to ": "copies a file",
    "similarity index ": "renames or copies a file",
    "dissimilarity index ": "rewrites a file wholesale",
    "old mode ": "changes a file mode",
    "new mode ": "changes a file mode",
    "GIT binary patch": "has a binary part",
    "Binary files ": "has a binary part",
}


@dataclass
class FileSection:
    old: str
    new: str
    hunks: int = 0

    @property
    def target(self) -> str:
        return self.new if self.new != "/dev/null" else self.old


@dataclass
class DiffInspector:
    """Reads a unified diff the way `patch -p1 -u` will, without applying it."""

    allowed: tuple[str, ...]
    named: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    sections: list[FileSection] = field(default_factory=list)

    def inspect(self, diff: str) -> tuple[str, ...]:
        """Return the repository paths the diff touches, or raise Refused."""
        if "\x00" in diff:
            self.problems.append("has a binary part")
        self._scan(diff.split("\n"))
        outside = [name for name in self.named if name not in self.allowed]
        if outside:
            raise Refused("unsafe-path", f"the diff names {outside[0]!r}, which is neither src_path nor test_path")
        if not self.sections:
            raise Refused("diff-rejected", "the diff has no '--- a/...' / '+++ b/...' file headers")
        if self.problems:
            raise Refused("diff-rejected", f"the diff {self.problems[0]}")
        targets = [section.target for section in self.sections]
        if len(set(targets)) != len(targets):
            raise Refused("diff-rejected", "the diff patches the same file twice")
        return tuple(targets)

    def _name(self, raw: str, prefix: str) -> str:
        """The repository path a header names after -p1, recorded for the path check."""
        text = raw.rstrip("\r").split("\t")[0]
        token = text.split()[0] if text.split() else ""
        if token == "/dev/null":
            return token
        if token.startswith(prefix):
            name = token[len(prefix):]
        else:
            name = token  # without the a/ or b/ prefix -p1 would write somewhere else
            self.named.append(f"{token} (no {prefix} prefix)")
            return name
        self.named.append(name)
        return name

    def _scan(self, lines: list[str]) -> None:
        index = 0
        while index < len(lines):
            line = lines[index]
            if line.startswith("--- "):
                if index + 1 >= len(lines) or not lines[index + 1].startswith("+++ "):
                    self.problems.append("has a '---' header without its '+++' line")
                    index += 1
                    continue
                old = self._name(line[4:], "a/")
                new = self._name(lines[index + 1][4:], "b/")
                if old == "/dev/null" and new == "/dev/null":
                    self.problems.append("has a header with /dev/null on both sides")
                elif "/dev/null" not in (old, new) and old != new:
                    self.problems.append(f"renames {old!r} to {new!r}")
                self.sections.append(FileSection(old, new))
                index += 2
                continue
            if line.startswith("+++ "):
                self.problems.append("has a '+++' header without its '---' line")
            elif line.startswith("@@"):
                match = _HUNK.match(line)
                if match is None:
                    self.problems.append(f"has a malformed hunk header {line[:40]!r}")
                elif not self.sections:
                    self.problems.append("has a hunk before any file header")
                else:
                    self.sections[-1].hunks += 1
                    old_left = 1 if match.group(2) is None else int(match.group(2))
                    new_left = 1 if match.group(4) is None else int(match.group(4))
                    index = self._skip_hunk(lines, index + 1, old_left, new_left)
                    continue
            elif line.startswith("diff --git "):
                self._git_header(line)
            elif line.startswith("Index: "):
                self._index_line(line)
            elif line.startswith(("new file mode ", "deleted file mode ")):
                if line.rstrip("\r").split()[-1] != "100644":
                    self.problems.append("creates or deletes a file with a special mode")
            else:
                for start, why in _REJECTED_LINES.items():
                    if line.startswith(start):
                        self.problems.append(why)
                        if start.startswith(("rename", "copy")):
                            self.named.append(line[len(start):].rstrip("\r"))
                        break
            index += 1
        for section in self.sections:
            if section.hunks == 0:
                self.problems.append(f"has no hunk for {section.target!r}")

    @staticmethod
    def _skip_hunk(lines: list[str], index: int, old_left: int, new_left: int) -> int:
        while index < len(lines) and (old_left > 0 or new_left > 0):
            line = lines[index]
            if line.startswith(" ") or line in ("", "\r"):
                old_left -= 1
                new_left -= 1
            elif line.startswith("-"):
                old_left -= 1
            elif line.startswith("+"):
                new_left -= 1
            elif not line.startswith("\\"):
                break  # short hunk: leave it to patch's dry run
            index += 1
        return index

    def _git_header(self, line: str) -> None:
        parts = line[len("diff --git "):].rstrip("\r").split(" ")
        if len(parts) != 2 or not parts[0].startswith("a/") or not parts[1].startswith("b/"):
            self.named.append(line[len("diff --git "):].rstrip("\r"))
            return
        old, new = parts[0][2:], parts[1][2:]
        self.named.extend((old, new))
        if old != new:
            self.problems.append(f"renames {old!r} to {new!r}")

    def _index_line(self, line: str) -> None:
        name = line[len("Index: "):].rstrip("\r").strip()
        stripped = name.split("/", 1)[1] if "/" in name else name
        if name in self.allowed or stripped in self.allowed:
            return
        self.named.append(name)


# -------------------------------------------------------------- 4. behaviour

@dataclass(frozen=True)
class ContractBook:
    repo: Path

    def node_for(self, behavior_id: str) -> str:
        try:
            contracts = json.loads((self.repo / "contracts.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise Refused("unknown-behavior", f"cannot read the repository's contracts.json: {exc}")
        if not isinstance(contracts, dict) or behavior_id not in contracts:
            raise Refused("unknown-behavior", f"behavior_id {behavior_id!r} is not in contracts.json")
        node = contracts[behavior_id]
        if not isinstance(node, str) or not node.strip() or node.startswith("-"):
            raise Refused("contract-error", f"contracts.json maps {behavior_id!r} to an unusable node {node!r}")
        return node


# ------------------------------------------------------------ 5/7. contract

class Verdict(enum.Enum):
    GREEN = "green"
    RED = "red"
    ERROR = "error"


@dataclass(frozen=True)
class ContractRunner:
    repo: Path
    node: str
    timeout: float = PYTEST_TIMEOUT_SECONDS

    def run(self) -> tuple[Verdict, str]:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", self.node]
        with tempfile.TemporaryDirectory(prefix="contract-gate-") as scratch:
            Path(scratch, "contract_gate_no_network.py").write_text(NO_NETWORK_PLUGIN, encoding="utf-8")
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [scratch, env.get("PYTHONPATH")]))
            env["PYTEST_PLUGINS"] = "contract_gate_no_network"
            env["PYTHONDONTWRITEBYTECODE"] = "1"
            for proxy in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
                env.pop(proxy, None)
            try:
                done = subprocess.run(command, cwd=self.repo, env=env, stdin=subprocess.DEVNULL,
                                      capture_output=True, text=True, errors="replace",
                                      timeout=self.timeout)
            except subprocess.TimeoutExpired:
                return Verdict.ERROR, f"{self.node} did not finish within {self.timeout:g}s"
            except OSError as exc:
                return Verdict.ERROR, f"could not start pytest: {exc}"
        if done.returncode == 0:
            return Verdict.GREEN, f"{self.node} passes"
        if done.returncode == 1:
            return Verdict.RED, f"{self.node} fails"
        lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        tail = lines[-1] if lines else "no output"
        return Verdict.ERROR, f"pytest exited {done.returncode} on {self.node}: {tail}"


# ------------------------------------------------------------ 6. the write

@dataclass(frozen=True)
class Patcher:
    repo: Path
    diff: str

    def _run(self, *extra: str) -> tuple[bool, str]:
        try:
            payload = self.diff.encode("utf-8")
        except UnicodeEncodeError:
            return False, "the diff is not encodable as UTF-8"
        env = {key: value for key, value in os.environ.items()
               if key not in ("POSIXLY_CORRECT", "PATCH_GET", "VERSION_CONTROL",
                              "PATCH_VERSION_CONTROL", "SIMPLE_BACKUP_SUFFIX")}
        try:
            done = subprocess.run([*PATCH_COMMAND, *extra], cwd=self.repo, input=payload, env=env,
                                  capture_output=True, timeout=PATCH_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            return False, "patch timed out"
        except OSError as exc:
            return False, f"could not run patch: {exc}"
        output = (done.stdout + done.stderr).decode("utf-8", "replace")
        return done.returncode == 0, output

    def check(self) -> None:
        ok, output = self._run("--dry-run")
        if not ok:
            raise Refused("diff-rejected", f"the diff does not apply cleanly to the current files: {output}")

    def apply(self) -> tuple[bool, str]:
        return self._run()


@dataclass
class Snapshot:
    """Exact bytes (or absence) of the touched paths just before the write."""

    repo: Path
    files: dict[str, tuple[bytes, int] | None]
    absent_dirs: list[Path]
    absent_sidecars: list[Path]

    @classmethod
    def take(cls, repo: Path, paths: tuple[str, ...]) -> "Snapshot":
        files: dict[str, tuple[bytes, int] | None] = {}
        absent_dirs: list[Path] = []
        sidecars: list[Path] = []
        for rel in paths:
            full = repo / rel
            if full.is_file():
                files[rel] = (full.read_bytes(), full.stat().st_mode & 0o7777)
            else:
                files[rel] = None
            parent = full.parent
            while parent != repo and not parent.exists():
                absent_dirs.append(parent)
                parent = parent.parent
            for suffix in (".orig", ".rej"):
                sidecar = full.with_name(full.name + suffix)
                if not sidecar.exists():
                    sidecars.append(sidecar)
        return cls(repo, files, absent_dirs, sidecars)

    def restore(self) -> None:
        for rel, saved in self.files.items():
            full = self.repo / rel
            if saved is None:
                if full.is_file() or full.is_symlink():
                    full.unlink()
                continue
            data, mode = saved
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_bytes(data)
            os.chmod(full, mode)
        for sidecar in self.absent_sidecars:
            if sidecar.is_file():
                sidecar.unlink()
        for folder in sorted(set(self.absent_dirs), key=lambda p: len(p.parts), reverse=True):
            try:
                folder.rmdir()
            except OSError:
                pass


def _write_and_prove(repo: Path, diff: str, node: str, touched: tuple[str, ...]) -> Result:
    snapshot = Snapshot.take(repo, touched)
    try:
        ok, output = Patcher(repo, diff).apply()
        if not ok:
            snapshot.restore()
            return Result("diff-rejected", one_line(f"patch failed after a clean dry run; restored: {output}"))
        verdict, detail = ContractRunner(repo, node).run()
    except BaseException:
        snapshot.restore()
        raise
    if verdict is Verdict.GREEN:
        return Result("applied", one_line(f"{detail} after the write; wrote {', '.join(touched)}"), touched)
    snapshot.restore()
    return Result("reverted", one_line(f"{detail} after the write ({verdict.value}); "
                                       f"restored {', '.join(touched)}"), touched)


# --------------------------------------------------------------------- gate

def gate(proposal_path: str | os.PathLike, repo_root: str | os.PathLike) -> Result:
    repo = Path(repo_root)
    try:
        proposal = Proposal.load(proposal_path)
        PathPolicy(repo).check(proposal.src_path, proposal.test_path)
        touched = DiffInspector((proposal.src_path, proposal.test_path)).inspect(proposal.diff)
        node = ContractBook(repo).node_for(proposal.behavior_id)
        verdict, detail = ContractRunner(repo, node).run()
        if verdict is Verdict.GREEN:
            raise Refused("contract-green", f"{detail} before any write: nothing to prove, nothing written")
        if verdict is Verdict.ERROR:
            raise Refused("contract-error", f"{detail}; nothing written")
        Patcher(repo, proposal.diff).check()
    except Refused as refusal:
        return refusal.result()
    try:
        return _write_and_prove(repo, proposal.diff, node, touched)
    except Exception as exc:  # already restored by _write_and_prove
        return Result("reverted", one_line(f"the gate failed after the write and restored the files: {exc!r}"),
                      touched)


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
