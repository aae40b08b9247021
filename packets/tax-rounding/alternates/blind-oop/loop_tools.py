"""Helpers for the diff-only model loop.

    python3 loop_tools.py job             write job.json (signatures only, no bodies)
    python3 loop_tools.py check           check every path in patch.diff is on allowlist.txt
    python3 loop_tools.py trial           git-apply patch.diff in a throwaway copy and run the node there
"""
from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent
NODE = "tests/test_compute.py::test_add_tax_rounds_half_up"
SOURCE = ROOT / "taxlib" / "compute.py"
ALLOWLIST = ROOT / "allowlist.txt"
PATCH = ROOT / "patch.diff"


@dataclass
class Argument:
    name: str
    annotation: str | None


@dataclass
class Signature:
    name: str
    args: list[Argument]
    returns: str | None

    @classmethod
    def of(cls, node: ast.FunctionDef) -> "Signature":
        a = node.args
        every = a.posonlyargs + a.args + ([a.vararg] if a.vararg else []) + a.kwonlyargs \
            + ([a.kwarg] if a.kwarg else [])
        args = [Argument(x.arg, ast.unparse(x.annotation) if x.annotation else None) for x in every]
        return cls(node.name, args, ast.unparse(node.returns) if node.returns else None)


@dataclass
class Job:
    goal: str
    constraints: list[str]
    allowlist: list[str]
    signatures: list[Signature]
    failing_test: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(cls) -> "Job":
        tree = ast.parse(SOURCE.read_text(encoding="utf-8"))
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        allow = [line.strip() for line in ALLOWLIST.read_text(encoding="utf-8").splitlines() if line.strip()]
        test_path = NODE.split("::")[0]
        return cls(
            goal="Make add_tax round the tax half up to a whole cent, exactly, so the failing test passes.",
            constraints=[
                "Answer with a unified diff only: no prose, no markdown fences.",
                "Write paths as a/taxlib/compute.py and b/taxlib/compute.py, applicable with git apply from the workspace root.",
                "Touch only the paths on the allowlist.",
                "Do not edit, add or delete tests, the allowlist or test configuration.",
                "Keep the signature add_tax(cents: int, rate_bps: int) -> int.",
                "Standard library only.",
                "Use exact integer arithmetic, no floats, for any non-negative cents and rate_bps.",
                "Fix the rounding rule, not just the one test case.",
            ],
            allowlist=allow,
            signatures=[Signature.of(f) for f in functions],
            failing_test={"nodeid": NODE, "source": (ROOT / test_path).read_text(encoding="utf-8")},
        )

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")


class DiffGuard:
    """Rejects a diff that is not a diff or that names any path off the allowlist."""

    GIT_HEADER = re.compile(r"^diff --git a/(\S+) b/(\S+)$")
    FILE_LINE = re.compile(r"^(?:---|\+\+\+|rename from|rename to|copy from|copy to) (.+)$")

    def __init__(self, allowed: list[str]) -> None:
        self.allowed = set(allowed)

    @staticmethod
    def _path(raw: str) -> str:
        raw = raw.split("\t")[0].strip()
        return raw[2:] if raw[:2] in ("a/", "b/") else raw

    def paths(self, text: str) -> list[str]:
        found = []
        for line in text.splitlines():
            git = self.GIT_HEADER.match(line)
            if git:
                found += [git.group(1), git.group(2)]
            elif line.startswith("diff "):
                found.append(line)  # a header we cannot read is treated as off the list
            else:
                other = self.FILE_LINE.match(line)
                if other:
                    found.append(self._path(other.group(1)))
        return found

    def problems(self, text: str) -> list[str]:
        paths = self.paths(text)
        found = [f"path off the allowlist: {p}" for p in paths if p not in self.allowed]
        if not paths or not re.search(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@", text, re.M):
            found.append("not a unified diff (no file headers or no hunks)")
        return found


class Sandbox:
    """A throwaway copy of the workspace."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="taxlib-trial-"))
        shutil.copytree(ROOT, self.dir / "tree",
                        ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", ".git"))
        self.tree = self.dir / "tree"

    def run(self, *cmd: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, cwd=self.tree, capture_output=True, text=True)

    def close(self) -> None:
        shutil.rmtree(self.dir)


def node_run(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider", NODE],
                          cwd=cwd, capture_output=True, text=True)


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) == 2 else ""
    if command == "job":
        Job.build().write(ROOT / "job.json")
        print("wrote job.json")
        return 0
    allowed = [l.strip() for l in ALLOWLIST.read_text(encoding="utf-8").splitlines() if l.strip()]
    if command == "check":
        problems = DiffGuard(allowed).problems(PATCH.read_text(encoding="utf-8"))
        print("\n".join(problems) or "patch.diff: every path is on the allowlist")
        return 1 if problems else 0
    if command == "trial":
        problems = DiffGuard(allowed).problems(PATCH.read_text(encoding="utf-8"))
        if problems:
            print("REJECTED, not applied:\n" + "\n".join(problems))
            return 1
        box = Sandbox()
        try:
            applied = box.run("git", "apply", "--verbose", str(PATCH))
            print(applied.stdout + applied.stderr, end="")
            if applied.returncode:
                print("git apply failed in the copy")
                return 1
            copy = node_run(box.tree)
            print("copy:", copy.stdout.strip().splitlines()[-1])
            cases = box.run(sys.executable, "-c",
                            "from taxlib import add_tax\n"
                            "cases = [(199, 725, 213), (100, 50, 101), (100, 150, 102), (1, 5000, 2),"
                            " (1, 4999, 1), (0, 725, 0), (1000, 0, 1000), (10**18 + 1, 725, 10**18 + 1 + 72500000000000000)]\n"
                            "bad = [(c, r, add_tax(c, r), want) for c, r, want in cases if add_tax(c, r) != want]\n"
                            "print('extra cases:', 'all ok' if not bad else bad)")
            print(cases.stdout + cases.stderr, end="")
        finally:
            box.close()
        mine = node_run(ROOT)
        print("own tree:", mine.stdout.strip().splitlines()[-1])
        return 0 if copy.returncode == 0 and mine.returncode != 0 else 1
    print(__doc__)
    return 64


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
