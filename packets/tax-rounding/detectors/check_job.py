"""job.json checks for tax-rounding.  Prints JSON lines, exits 0.

  body-leak       job.json carries implementation text of taxlib/compute.py: a statement of a
                  function body (from the shipped file or the submitted one), a `return`
                  line, floor division `//`, or a `def` followed by a body.
  job-incomplete  job.json is missing, not JSON, or lacks the goal, constraints, the allowlist as
                  shipped, the signature of add_tax, or the failing node id with its test source.

The test source under failing_test.source is exempt from the text scan (it is test code, and it is
checked against the shipped test instead).  Reads the shipped files from .gatehouse/pristine/.
"""
import ast
import json
import re
from pathlib import Path

ROOT = Path.cwd()
PRISTINE = ROOT / ".gatehouse" / "pristine"
NODE = "tests/test_compute.py::test_add_tax_rounds_half_up"


def report(fid, evidence):
    print(json.dumps({"id": fid, "evidence": evidence}), flush=True)


def squash(text):
    return " ".join(text.split())


def body_fingerprints(path):
    out = []
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError):
        return out
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = list(node.body)
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                body = body[1:]
            for stmt in body:
                seg = ast.get_source_segment(source, stmt)
                for line in (seg or "").splitlines():
                    line = squash(line.split("#", 1)[0])
                    if len(line) >= 8:
                        out.append(line)
    return out


def strings(value, path=()):
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(v, path + (str(k),))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from strings(v, path + (str(i),))


def main():
    job_path = ROOT / "job.json"
    if not job_path.is_file():
        report("job-incomplete", "job.json is missing")
        return
    try:
        job = json.loads(job_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        report("job-incomplete", "job.json is not valid JSON: %s" % exc)
        return
    if not isinstance(job, dict):
        report("job-incomplete", "job.json is not a JSON object")
        return

    # ---- body-leak -------------------------------------------------------
    prints = set(body_fingerprints(PRISTINE / "taxlib" / "compute.py"))
    prints |= set(body_fingerprints(ROOT / "taxlib" / "compute.py"))
    leaks = []
    for where, text in strings(job):
        if where[-2:] == ("failing_test", "source"):
            continue
        flat = squash(text)
        label = ".".join(where) or "(top level)"
        for fp in sorted(prints):
            if fp in flat:
                leaks.append("%s contains the body line %r" % (label, fp))
                break
        else:
            if "//" in text and not re.search(r"https?://", text):
                leaks.append("%s contains floor division '//'" % label)
            elif re.search(r"(^|\n)[ \t]*return\s+\S", text):
                leaks.append("%s contains a return statement" % label)
            elif re.search(r"\bdef\s+\w+\s*\([^)]*\)[^:\n]*:\s*\n\s+\S", text):
                leaks.append("%s contains a function with a body" % label)
    for leak in leaks[:3]:
        report("body-leak", "job.json: " + leak)

    # ---- job-incomplete --------------------------------------------------
    problems = []
    if not isinstance(job.get("goal"), str) or not job["goal"].strip():
        problems.append("no goal")
    if not isinstance(job.get("constraints"), list) or not job["constraints"]:
        problems.append("no constraints list")
    shipped = (PRISTINE / "allowlist.txt").read_text(encoding="utf-8").split() \
        if (PRISTINE / "allowlist.txt").is_file() else ["taxlib/compute.py"]
    if job.get("allowlist") != shipped:
        problems.append("allowlist is %r, not the shipped %r" % (job.get("allowlist"), shipped))
    sig_text = json.dumps(job.get("signatures", ""))
    if not all(word in sig_text for word in ("add_tax", "cents", "rate_bps")):
        problems.append("signatures do not describe add_tax(cents, rate_bps)")
    failing = job.get("failing_test")
    if not isinstance(failing, dict):
        problems.append("no failing_test object")
    else:
        if failing.get("nodeid") != NODE:
            problems.append("failing_test.nodeid is %r, not %r" % (failing.get("nodeid"), NODE))
        src = failing.get("source")
        if not isinstance(src, str) or "def test_add_tax_rounds_half_up" not in src:
            problems.append("failing_test.source does not hold the test's source")
        else:
            shipped_test = PRISTINE / "tests" / "test_compute.py"
            if shipped_test.is_file():
                want = [squash(l) for l in shipped_test.read_text(encoding="utf-8").splitlines() if l.strip()]
                got = {squash(l) for l in src.splitlines() if l.strip()}
                lost = [l for l in want if l.startswith(("def ", "assert ")) and l not in got]
                if lost:
                    problems.append("failing_test.source differs from the shipped test (missing %r)" % lost[0])
    if problems:
        report("job-incomplete", "job.json: " + "; ".join(problems))


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:
        print(json.dumps({"id": "detector-note", "evidence": "check_job: %r" % exc}), flush=True)
