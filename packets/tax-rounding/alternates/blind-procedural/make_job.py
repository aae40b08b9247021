"""Write job.json: everything the model may see, and no function bodies."""
import ast
import json

NODEID = "tests/test_compute.py::test_add_tax_rounds_half_up"


def annotation_text(node):
    return None if node is None else ast.unparse(node)


def signature(fn):
    params = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
    if fn.args.vararg:
        params.append(fn.args.vararg)
    if fn.args.kwarg:
        params.append(fn.args.kwarg)
    return {
        "name": fn.name,
        "arguments": [{"name": p.arg, "annotation": annotation_text(p.annotation)} for p in params],
        "return_annotation": annotation_text(fn.returns),
    }


def signatures(path):
    with open(path, encoding="utf-8") as handle:
        module = ast.parse(handle.read())
    return [signature(n) for n in ast.walk(module) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def read_lines(path):
    with open(path, encoding="utf-8") as handle:
        return [line.strip() for line in handle if line.strip()]


def read_text(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def main():
    job = {
        "goal": "Change add_tax so the tax is rounded half up to a whole cent with exact integer arithmetic.",
        "constraints": [
            "Reply with a unified diff and nothing else (no prose, no code fences).",
            "Use the paths a/taxlib/compute.py and b/taxlib/compute.py; the diff must apply with git apply at the workspace root.",
            "Only files listed in allowlist may appear in the diff.",
            "Leave tests, the allowlist and any test configuration untouched.",
            "Keep add_tax(cents: int, rate_bps: int) -> int unchanged.",
            "Standard library only.",
            "No floats: the result must be exact for any non-negative cents and rate_bps.",
            "Implement the general rounding rule, not a special case for the failing test.",
        ],
        "allowlist": read_lines("allowlist.txt"),
        "signatures": signatures("taxlib/compute.py"),
        "failing_test": {"nodeid": NODEID, "source": read_text(NODEID.split("::")[0])},
    }
    with open("job.json", "w", encoding="utf-8") as handle:
        json.dump(job, handle, indent=2)
        handle.write("\n")


if __name__ == "__main__":
    main()
