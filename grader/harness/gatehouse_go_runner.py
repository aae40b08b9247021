"""Gatehouse's trusted `go test` runner (see grader/src/lang_go.rs).

Run as `python3 -I -B /gatehouse/gatehouse_go_runner.py ARGS`, where ARGS
are what the packet wrote after `go test`. The candidate's Go code is
compiled into the test binary, so nothing that binary prints is trusted on
its own: this runner, a separate process the binary cannot reach, owns the
result channel (file descriptor 3, records tagged with a per-run nonce that
is erased from the environment before any Go code runs and never given to
the go command, which gets no descriptor but 0-2). It reads the go
command's test2json stream and reports one record per top-level test; the
grader cross-checks those against the exit status and the planted canary
pair (one test that must pass, one that must fail, under random names). A
test binary that crashed (a panic or fatal error with its goroutine trace,
in a subtest or a goroutine too; a test left running when it ended; a
package that did not build) is one `crash` record per package: the test it
happened in, the message, the first frame in the candidate's code. The
grader fails the tests it did not report (`trusted::ending`).

The toolchain and the standard library come from the host's read-only
GOROOT; every GO* and CGO* variable of the environment is dropped and set
here: GOFLAGS=-mod=mod (a `vendor/` folder is never read), GOWORK=off (a
`go.work` is never read), GOPROXY=off (nothing is fetched), GOCACHE and
GOPATH in the run's own /tmp (fresh per run), -vet=off. What a submission
could use to change what compiles is refused before the build (cgo, `.syso`
objects, which would link code that is not its source) or reported for the
reviewer (files left out by build constraints, a `go.work`, a `vendor/`,
a `TestMain`).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import threading

GOROOT_CANDIDATES = ("/usr/lib/go", "/usr/local/go")
# `go test` flags a packet command may not use: they run another program,
# choose other sources, or change where results go.
REFUSED_FLAGS = ("-exec", "-toolexec", "-c", "-o", "-json", "-mod", "-modfile",
                 "-overlay", "-work", "-n", "-x", "-vet", "-cover", "-coverprofile",
                 "-outputdir", "-i", "-a", "-ldflags", "-gcflags", "-asmflags",
                 "-gccgoflags", "-compiler", "-pkgdir", "-buildmode", "-linkshared")
MAX_OUTPUT = 2000
# What `go list` said about the root package (its import path).
ROOT = {}


class Channel:
    def __init__(self, nonce):
        self.nonce = nonce
        try:
            self.out = os.fdopen(3, "w", buffering=1, encoding="utf-8", closefd=True)
        except OSError:
            self.out = None

    def send(self, t, **fields):
        if self.out is None:
            return
        fields["t"] = t
        fields["nonce"] = self.nonce
        self.out.write(json.dumps(fields) + "\n")
        self.out.flush()


def goroot():
    for root in GOROOT_CANDIDATES:
        real = os.path.realpath(root)
        if os.path.isfile(os.path.join(real, "bin", "go")):
            return real
    return None


def go_env(root, tmp):
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("GO") or k.startswith("CGO") or k in (
               "CC", "CXX", "AR", "PKG_CONFIG", "LD_PRELOAD", "LD_LIBRARY_PATH",
               "GATEHOUSE_NONCE", "GATEHOUSE_RUN", "GATEHOUSE_GO_TESTS"))}
    env.update({
        "GOROOT": root,
        "GOPATH": os.path.join(tmp, "path"),
        "GOMODCACHE": os.path.join(tmp, "path", "pkg", "mod"),
        "GOCACHE": os.path.join(tmp, "cache"),
        "GOTMPDIR": tmp,
        "GOFLAGS": "-mod=mod -buildvcs=false",
        "GOWORK": "off",
        "GOPROXY": "off",
        "GOSUMDB": "off",
        "GOTOOLCHAIN": "local",
        "GOTELEMETRY": "off",
        "GOENV": "off",
        "GO111MODULE": "on",
        # The host's standard library is prebuilt with cgo: linking against
        # it is ten times faster than rebuilding `net` without. The
        # candidate's own packages may not use cgo (refused below).
        "CGO_ENABLED": "1" if shutil.which("gcc", path="/usr/bin:/bin") else "0",
        "HOME": tmp,
        "PATH": os.path.join(root, "bin") + ":/usr/bin:/bin",
    })
    return env


def refused_flag(args):
    for a in args:
        name = a.split("=", 1)[0]
        if name.startswith("--"):
            name = name[1:]
        if name in REFUSED_FLAGS:
            return a
    return None


def packages(args):
    """The package patterns among ARGS (what is not a flag or a flag's value)."""
    takes_value = {"-run", "-count", "-timeout", "-bench", "-benchtime", "-cpu",
                   "-parallel", "-tags", "-p", "-shuffle", "-skip"}
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a.startswith("-"):
            skip = a.split("=", 1)[0].lstrip("-") in {f.lstrip("-") for f in takes_value} and "=" not in a
            continue
        out.append(a)
    return out or ["."]


def inspect(env, pkgs, ch):
    """`go list` of the packages: refuses what links code that is not its
    source, reports what changes what compiles. Returns a refusal or None."""
    done = subprocess.run(
        ["go", "list", "-e", "-json", "-test=false"] + pkgs,
        env=env, capture_output=True, text=True, timeout=120)
    if done.returncode != 0 and not done.stdout:
        return None  # the build will say what is wrong
    decoder = json.JSONDecoder()
    text, pos = done.stdout, 0
    cwd = os.getcwd()
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        try:
            pkg, pos = decoder.raw_decode(text, pos)
        except ValueError:
            break
        where = os.path.relpath(pkg.get("Dir", cwd), cwd)
        if where == ".":
            ROOT["path"] = str(pkg.get("ImportPath", ""))
        at = lambda f: f if where == "." else f"{where}/{f}"
        if pkg.get("CgoFiles"):
            return f"cgo is not allowed in graded code: {', '.join(at(f) for f in pkg['CgoFiles'])} import \"C\""
        if pkg.get("SysoFiles"):
            return f"compiled objects are not allowed in graded code: {', '.join(at(f) for f in pkg['SysoFiles'])}"
        for f in pkg.get("IgnoredGoFiles", []) + pkg.get("IgnoredOtherFiles", []):
            ch.send("audit", kind="go-build-constraint", file=at(f), line=0, via="direct", test="",
                    detail="a Go file left out of the build by its build constraints or file name (the graded code is not all the code shipped)")
        for f in pkg.get("GoFiles", []) + pkg.get("TestGoFiles", []) + pkg.get("XTestGoFiles", []):
            try:
                with open(os.path.join(pkg.get("Dir", cwd), f), encoding="utf-8", errors="replace") as fh:
                    src = fh.read(200_000)
            except OSError:
                continue
            for m in re.finditer(r"^//go:build .*$|^// \+build .*$", src, re.M):
                line = src.count("\n", 0, m.start()) + 1
                ch.send("audit", kind="go-build-constraint", file=at(f), line=line, via="direct", test="",
                        detail=f"a build constraint decides whether this file compiles: {m.group(0)[:120]}")
            for m in re.finditer(r"^func TestMain\(", src, re.M):
                line = src.count("\n", 0, m.start()) + 1
                ch.send("audit", kind="go-testmain", file=at(f), line=line, via="direct", test="",
                        detail="a TestMain runs before and after every test of the package")
            for m in re.finditer(r"^//go:linkname .*$", src, re.M):
                line = src.count("\n", 0, m.start()) + 1
                ch.send("audit", kind="go-linkname", file=at(f), line=line, via="direct", test="",
                        detail=f"a linkname reaches into another package's unexported code: {m.group(0)[:120]}")
    for name, what in (("go.work", "a go.work (ignored: GOWORK=off)"),
                       ("vendor", "a vendor/ folder (ignored: -mod=mod)")):
        if os.path.lexists(name):
            ch.send("audit", kind="go-workspace", file=name, line=0, via="direct", test="",
                    detail=f"the submission ships {what}")
    return None


BUILD_FAILED = re.compile(r"^FAIL\s+(\S+)\s+\[(?:build|setup) failed\]")
# The runtime's report of a crash starts at the beginning of a line (what a
# test logs is indented) and is followed by the goroutine trace.
CRASH_START = re.compile(r"^(panic|fatal error): (.*)$")
GOROUTINE = re.compile(r"^goroutine \d+ \[")
LOCATION = re.compile(r"^\t(/\S+\.go):(\d+)(?: |$)")
COMPILER_ERROR = re.compile(r"^(\S+\.go:\d+(?::\d+)?: .*)$")
MAX_TRACE_LINES = 400


def forward_stderr(stream, keep):
    for raw in stream:
        line = raw.decode("utf-8", "replace")
        sys.stderr.write(line)
        if len(keep) < 200:
            keep.append(line.rstrip("\n"))
    sys.stderr.flush()


def watch_crash(s, top, output):
    """Keeps the test binary's first crash report of a package: where it
    began (the top-level test whose output it is, or None at package
    level), its first line and the trace that follows."""
    c = s["crash"]
    for line in output.splitlines():
        if c is None:
            m = CRASH_START.match(line)
            if m:
                c = s["crash"] = {"top": top, "word": m.group(1), "first": m.group(2), "lines": [], "trace": False}
        elif len(c["lines"]) < MAX_TRACE_LINES:
            c["lines"].append(line)
            if GOROUTINE.match(line):
                c["trace"] = True


def first_frame(lines):
    """The first frame of a trace in the candidate's code: a workspace file
    that is not a test file (else any workspace file), as `file:line in
    function`."""
    cwd = os.getcwd().rstrip("/") + "/"
    found = []
    for i, line in enumerate(lines):
        m = LOCATION.match(line)
        if not m or not m.group(1).startswith(cwd):
            continue
        rel = m.group(1)[len(cwd):]
        func = lines[i - 1].strip() if i > 0 else ""
        call = re.match(r"^(.+?)\([^()]*\)$", func)
        func = call.group(1) if call else func
        found.append((rel.endswith("_test.go"), f"{rel}:{m.group(2)}" + (f" in {func}" if func else "")))
    own = [f for test, f in found if not test]
    return (own or [f for _, f in found] or [""])[0]


def crash_of(p, s, errors):
    """The crash record of package `p`'s test binary, or None when it did
    not crash: it passed, or failed only because tests failed."""
    if s["done"] == "pass":
        return None
    ident = lambda top: f"{p}::{top}" if top else ""
    running = sorted(s["running"])
    text = "".join(s["pkg_out"])
    if s["build"] or "[build failed]" in text or "[setup failed]" in text:
        first = next((COMPILER_ERROR.match(l).group(1) for l in errors if COMPILER_ERROR.match(l)), "")
        return {"id": p, "kind": "build", "test": "", "frame": "",
                "message": (first[2:] if first.startswith("./") else first)[:200] or "see the log"}
    c = s["crash"]
    if c is not None and c["trace"]:
        first = c["first"]
        if c["word"] == "panic":
            first = first[:-len(" [recovered]")] if first.endswith(" [recovered]") else first
            kind = "timeout" if first.startswith("test timed out after ") else "panic"
        else:
            kind = "fatal"
        top = c["top"] or (running[0] if running else "")
        return {"id": p, "kind": kind, "test": ident(top), "message": first[:200],
                "frame": first_frame(c["lines"])}
    if running:
        return {"id": p, "kind": "exit", "test": ident(running[0]), "frame": "",
                "message": "it ended without a report (an os.Exit, or killed by a signal)"}
    if s["done"] == "fail" and s["seen"] == 0:
        return {"id": p, "kind": "exit", "test": "", "frame": "",
                "message": "it ended before any test ran"}
    return None


def only_packet_tests(folder, keep, ch):
    """A step that runs only the packet's tests (GATEHOUSE_GO_TESTS names
    the folder under .gatehouse/ they were laid in): every other `_test.go`
    of the root package is set aside and the packet's are copied in, so no
    test file of the candidate compiles beside them. Returns a refusal or
    None."""
    norm = os.path.normpath(folder)
    if not norm.startswith(".gatehouse/") or ".." in norm.split("/"):
        return f"GATEHOUSE_GO_TESTS must name a folder under .gatehouse/, not {folder!r}"
    if not os.path.isdir(norm) or os.path.islink(norm):
        return f"GATEHOUSE_GO_TESTS names {folder!r}, which is not a folder"
    # Beside the workspace's own files (a rename across mounts fails), in a
    # dot folder no package pattern reaches.
    aside = os.path.join(".gatehouse", f"go-aside-{os.getpid()}")
    os.makedirs(aside, exist_ok=True)
    for name in sorted(os.listdir(".")):
        if name.endswith("_test.go") and name not in keep:
            os.rename(name, os.path.join(aside, name))
    for name in sorted(os.listdir(norm)):
        src = os.path.join(norm, name)
        if name.endswith("_test.go") and os.path.isfile(src) and not os.path.islink(src):
            with open(src, "rb") as fh, open(name, "wb") as out:
                out.write(fh.read())
    return None


def main(argv):
    nonce = os.environ.pop("GATEHOUSE_NONCE", "")
    try:
        config = json.loads(os.environ.pop("GATEHOUSE_RUN", "") or "{}")
    except ValueError:
        config = {}
    only = os.environ.pop("GATEHOUSE_GO_TESTS", "")
    ch = Channel(nonce)
    ch.send("start")
    args = argv[1:]
    root = goroot()
    if root is None:
        ch.send("collect-error", id="go", message="no Go toolchain in the sandbox (GOROOT not found)")
        ch.send("end", exit=2)
        return 2
    bad = refused_flag(args)
    if bad is not None:
        ch.send("collect-error", id="go", message=f"the trusted go test runner does not take {bad}")
        ch.send("end", exit=2)
        return 2
    tmp = os.path.join("/tmp", f"gatehouse-go-{os.getpid()}")
    os.makedirs(tmp, exist_ok=True)
    env = go_env(root, tmp)
    pkgs = packages(args)
    refusal = None
    if only:
        keep = {os.path.basename(p) for p in config.get("extra_tests", []) if isinstance(p, str)}
        refusal = only_packet_tests(only, keep, ch)
    refusal = refusal or inspect(env, pkgs, ch)
    if refusal is not None:
        print(f"gatehouse: {refusal}", file=sys.stderr)
        ch.send("collect-error", id=pkgs[0], message=refusal)
        ch.send("end", exit=1)
        return 1
    command = [os.path.join(root, "bin", "go"), "test", "-json", "-vet=off"] + args
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True)
    # The go command's stderr (the compiler's errors) goes on to ours; its
    # head is kept to name a build failure.
    errors = []
    pump = threading.Thread(target=forward_stderr, args=(proc.stderr, errors), daemon=True)
    pump.start()
    # Per package: tests started, tests finished, output, final action, and
    # the first runtime crash report the test binary printed.
    state = {}
    reported = []

    def pkg_state(p):
        return state.setdefault(p, {"running": set(), "out": {}, "pkg_out": [], "done": None, "seen": 0,
                                    "build": False, "crash": None})

    for raw in proc.stdout:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        if len(line) > 1_000_000:
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            # Go 1.19 prints a build failure as plain text.
            m = BUILD_FAILED.match(line)
            if m:
                s = pkg_state(m.group(1))
                s["build"], s["done"] = True, "fail"
            sys.stdout.write(line + "\n")
            continue
        if not isinstance(ev, dict):
            continue
        p = str(ev.get("Package", ""))
        test = ev.get("Test")
        action = ev.get("Action")
        output = ev.get("Output")
        if isinstance(output, str):
            sys.stdout.write(output)
        s = pkg_state(p)
        top = test.split("/", 1)[0] if isinstance(test, str) and test else None
        if isinstance(output, str):
            watch_crash(s, top, output)
        if top is None:
            if isinstance(output, str) and len(s["pkg_out"]) < 200:
                s["pkg_out"].append(output)
            if action in ("pass", "fail", "skip"):
                s["done"] = action
            continue
        if action == "output" and isinstance(output, str):
            # A subtest's output is its test's too (its failure message).
            buf = s["out"].setdefault(top, [])
            if sum(len(x) for x in buf) < MAX_OUTPUT:
                buf.append(output)
        if test != top:
            continue  # subtests fold into their test
        if action == "run":
            s["running"].add(top)
        elif action in ("pass", "fail", "skip"):
            s["running"].discard(top)
            s["seen"] += 1
            status = {"pass": "passed", "fail": "failed", "skip": "skipped"}[action]
            message = ""
            if action != "pass":
                lines = [x.strip() for x in s["out"].get(top, []) if x.strip()
                         and not x.lstrip().startswith(("=== ", "--- "))]
                message = " | ".join(lines)[:200]
            reported.append(f"{p}::{top}")
            ch.send("case", id=f"{p}::{top}", classname=p, name=top, status=status, message=message)
    code = proc.wait()
    pump.join(timeout=5)
    for p, s in state.items():
        crash = crash_of(p, s, errors)
        if crash is not None:
            ch.send("crash", **crash)
    if code != 0 and not state:
        ch.send("collect-error", id=pkgs[0], message="go test failed before any package ran (see the log)")
    pkg_path = ROOT.get("path") or next(iter(state), "")
    if only:
        # Only the packet's tests and the canaries compiled: what ran is
        # what the step defines (recorded on the sample), with the canaries
        # that were planted, reported or not.
        ids = set(reported)
        for path in config.get("extra_tests", []):
            rel = os.path.normpath(str(path))
            if rel.startswith("..") or os.path.isabs(rel):
                continue
            sub = os.path.dirname(rel)
            pkg = f"{pkg_path}/{sub}" if sub else pkg_path
            try:
                with open(rel, encoding="utf-8") as fh:
                    ids.update(f"{pkg}::{m}" for m in re.findall(r"^func (Test\w+)\(", fh.read(), re.M))
            except OSError:
                pass
        ch.send("collected", ids=sorted(ids))
    exit_code = 0 if code == 0 else 1
    ch.send("end", exit=exit_code)
    sys.stdout.flush()
    return exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
