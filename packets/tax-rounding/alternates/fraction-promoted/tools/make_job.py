"""Build job.json: everything the model may see, and nothing else.

Signatures come from the AST of taxlib/compute.py, so no function body
(not even a docstring) can end up in the job.
"""
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NODE = "tests/test_compute.py::test_add_tax_rounds_half_up"


def annotation(node):
    return None if node is None else ast.unparse(node)


def signatures(source: str) -> list:
    out = []
    for fn in ast.parse(source).body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = [{"name": a.arg, "annotation": annotation(a.annotation)}
                  for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
        out.append({"name": fn.name, "params": params, "returns": annotation(fn.returns)})
    return out


def main() -> int:
    test_file = NODE.split("::", 1)[0]
    job = {
        "goal": "Round the sales tax in add_tax half up to a whole cent, exactly, for any non-negative input.",
        "constraints": [
            "Reply with a unified diff and nothing else (no prose, no code fences).",
            "Paths in the diff: a/taxlib/compute.py and b/taxlib/compute.py only.",
            "Only paths listed in allowlist may change.",
            "Do not touch tests, allowlist.txt, conftest.py or pytest.ini.",
            "Keep add_tax(cents: int, rate_bps: int) -> int.",
            "Standard library only; exact arithmetic, no float.",
            "Fix the rounding rule, not the single test case.",
        ],
        "allowlist": [line.strip() for line in (ROOT / "allowlist.txt").read_text().splitlines() if line.strip()],
        "signatures": signatures((ROOT / "taxlib" / "compute.py").read_text()),
        "failing_test": {"nodeid": NODE, "source": (ROOT / test_file).read_text()},
    }
    (ROOT / "job.json").write_text(json.dumps(job, indent=2, ensure_ascii=False) + "\n")
    print("wrote job.json with", len(job["signatures"]), "signature(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
