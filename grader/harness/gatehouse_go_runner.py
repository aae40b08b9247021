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

import hashlib
import json
import os
import re
import shutil
import signal
import stat
import socket
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
            ROOT["pkg"] = pkg
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
# Judged apart: the judge's note of where the host panicked, printed just
# before the judge raises that panic again (gatehouse_go_wire_judge.go).
HOST_PANIC = re.compile(r"^gatehouse judge: the host panicked at (\S.{0,300})$")
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
            at = HOST_PANIC.match(line)
            if at:
                s["host_at"] = at.group(1)
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
        if rel.startswith(WIRE_DIR + "/") or rel == "gatehouse_stub.go":
            continue  # the judge apart's own code
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
        frame = first_frame(c["lines"])
        if s.get("host_at") and any("zz_gatehouse_wire.Settle(" in l for l in c["lines"]):
            # A panic of the host's raised again in the judge: where it
            # happened in the candidate's code.
            frame = s["host_at"]
        return {"id": p, "kind": kind, "test": ident(top), "message": first[:200], "frame": frame}
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
    apart = None
    if config.get("judge") and only:
        # The judge apart: the packet's tests never share a process with
        # the candidate's code (gatehouse_go_apart.go).
        os.umask(0o007)
        os.chmod(tmp, 0o700)
        apart = Apart(root, tmp, env, args, only, config, ch)
    elif only:
        keep = {os.path.basename(p) for p in config.get("extra_tests", []) if isinstance(p, str)}
        refusal = only_packet_tests(only, keep, ch)
    refusal = refusal or inspect(env, pkgs, ch)
    if refusal is None and apart is not None:
        refusal = apart.prepare()
    if refusal is not None:
        print(f"gatehouse: {refusal}", file=sys.stderr)
        ch.send("collect-error", id=ROOT.get("path") or pkgs[0], message=refusal)
        if apart is not None:
            apart.close()
        ch.send("end", exit=1)
        return 1
    # The go command's stderr (the compiler's errors) goes on to ours; its
    # head is kept to name a build failure. Judged apart, the builds are
    # done (`Apart.prepare`) and the test binary's stderr is in its stream.
    errors = []
    pump = None
    if apart is not None:
        proc = apart.start()
    else:
        command = [os.path.join(root, "bin", "go"), "test", "-json", "-vet=off"] + args
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True)
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
    if pump is not None:
        pump.join(timeout=5)
    if apart is not None:
        apart.close()
    for p, s in state.items():
        crash = crash_of(p, s, errors)
        if crash is not None:
            ch.send("crash", **crash)
    if code != 0 and not state:
        ch.send("collect-error", id=pkgs[0], message="go test failed before any package ran (see the log)")
    pkg_path = ROOT.get("path") or next(iter(state), "")
    if only:
        if apart is not None:
            ids = set(reported)
            for path in apart.tests:
                ids.update(test_ids(path, pkg_path))
            ch.send("collected", ids=sorted(ids))
    if only and apart is None:
        # Only the packet's tests and the canaries compiled: what ran is
        # what the step defines (recorded on the sample), with the canaries
        # that were planted, reported or not.
        ids = set(reported)
        for path in config.get("extra_tests", []):
            rel = os.path.normpath(str(path))
            if rel.startswith("..") or os.path.isabs(rel):
                continue
            sub = os.path.dirname(rel)
            ids.update(test_ids(rel, f"{pkg_path}/{sub}" if sub else pkg_path))
        ch.send("collected", ids=sorted(ids))
    exit_code = 0 if code == 0 else 1
    ch.send("end", exit=exit_code)
    sys.stdout.flush()
    return exit_code



# ------------------------------------------------------------------ the judge apart

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATOR = "gatehouse_go_apart.go"
WIRE = "gatehouse_go_wire.go"
WIRE_JUDGE = "gatehouse_go_wire_judge.go"
WIRE_HOST = "gatehouse_go_wire_host.go"
# Folders of the judge's own packages in the module, in the judge's build
# and (as an overlay) in the host's.
WIRE_DIR = "zz_gatehouse_wire"
HOST_MAIN_DIR = "zz_gatehouse_host"
# `go test` flags the judge apart maps onto the test binary (-test.NAME) or
# its build, each with whether it takes a value; -v and -p change nothing.
TEST_FLAGS = {"run": True, "count": True, "timeout": True, "parallel": True, "cpu": True,
              "shuffle": True, "bench": True, "benchtime": True, "list": True,
              "failfast": False, "short": False, "benchmem": False}
BUILD_FLAGS = {"tags": True, "race": False, "trimpath": False}
IGNORED_FLAGS = {"v": False, "p": True}


def test_ids(path, pkg):
    """The ids (`PKG::TestX`) of the top-level tests a Go test file
    declares; none when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            return [f"{pkg}::{m}" for m in re.findall(r"^func (Test\w+)\(", fh.read(), re.M)]
    except OSError:
        return []


def split_flags(args):
    """ARGS as (test binary flags, build flags, packages), or a refusal."""
    test, build, pkgs = [], [], []
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if not a.startswith("-"):
            pkgs.append(a)
            continue
        name, eq, value = a.lstrip("-").partition("=")
        for table in (TEST_FLAGS, BUILD_FLAGS, IGNORED_FLAGS):
            if name in table:
                break
        else:
            return None, None, None, f"the judge apart does not take the go test flag {a}"
        if table[name] and not eq:
            if i >= len(args):
                return None, None, None, f"the go test flag {a} wants a value"
            value, eq = args[i], "="
            i += 1
        flag = name + (f"={value}" if eq else "")
        if table is TEST_FLAGS:
            test.append("-test." + flag)
        elif table is BUILD_FLAGS:
            build.append("-" + flag)
    return test, build, pkgs, None


def decode_stream(text):
    """The JSON values of a `go list -json` output."""
    out, decoder, pos = [], json.JSONDecoder(), 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return out
        try:
            value, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return out
        out.append(value)


def module_files(moddir):
    """Every file of the module a build of its non-test code could read:
    all but the grader's folder, test files and links, sorted."""
    out = []
    for dirpath, dirs, files in os.walk(moddir):
        rel = os.path.relpath(dirpath, moddir)
        if rel == ".gatehouse" or rel.startswith(".gatehouse/"):
            dirs[:] = []
            continue
        dirs.sort()
        for f in sorted(files):
            path = os.path.join(dirpath, f)
            if f.endswith("_test.go") or os.path.islink(path):
                continue
            out.append(path)
    return out


class Supervisor:
    """Requests to the host supervisor (gatehouse_host.py) on descriptor 4,
    one at a time; woken when made (a run judged apart makes it only once
    the builds are under way)."""

    def __init__(self, fd):
        sys.path.insert(0, HERE)
        import gatehouse_wire as wire  # noqa: E402
        sys.path.remove(HERE)
        self.wire_mod = wire
        sock = socket.socket(fileno=fd)
        # The sandbox starts the supervisor as a shell that waits for one
        # newline before it starts the interpreter (`lang::python::HOST_ARGV`).
        sock.sendall(b"\n")
        self.wire = wire.Wire(sock)
        self.lock = threading.Lock()
        self.next = 1

    def request(self, op, fds=(), timeout=30, **fields):
        with self.lock:
            rid = self.next
            self.next += 1
            fields.update(op=op, id=rid)
            if fds:
                self.wire.send_fds(fields, fds)
            else:
                self.wire.send(fields)
            deadline = __import__("time").monotonic() + timeout
            while True:
                msg = self.wire.recv(deadline=deadline)
                if isinstance(msg, dict) and msg.get("re") == rid:
                    return msg


class Apart:
    """A run judged apart: the hidden tests compiled with a stub of the
    candidate's package (never its code) into a test binary run under the
    judge's uid; the candidate's package built into a server that the host
    supervisor starts under the candidate's uid whenever the test binary
    asks (over a unix socket in a folder only the judge's uid reaches)."""

    def __init__(self, root, tmp, env, args, only, config, ch):
        self.go = os.path.join(root, "bin", "go")
        self.test2json = os.path.join(root, "pkg", "tool", "linux_amd64", "test2json")
        self.tmp, self.env, self.args, self.only, self.config, self.ch = tmp, env, args, only, config, ch
        self.private = os.path.join(tmp, "judge")
        self.hostdir = os.path.join("/tmp", f"gatehouse-go-host-{os.getpid()}")
        self.server = os.path.join(self.hostdir, "server")
        self.tests = []
        self.built = threading.Event()
        self.build_error = None
        self.spawned = []
        self.building = None
        self.lock = threading.Lock()
        self.sup = None
        self.listener = None

    def prepare(self):
        """Generates and builds both sides; a refusal, or None."""
        test_flags, build_flags, pkgs, err = split_flags(self.args)
        if err:
            return err
        if any(os.path.normpath(p) != "." for p in pkgs):
            return "the judge apart tests the root package (`.`) only, not " + " ".join(pkgs)
        norm = os.path.normpath(self.only)
        if not norm.startswith(".gatehouse/") or ".." in norm.split("/") or not os.path.isdir(norm) or os.path.islink(norm):
            return f"GATEHOUSE_GO_TESTS must name a folder under .gatehouse/, not {self.only!r}"
        self.tests = sorted(
            os.path.join(os.getcwd(), norm, n) for n in os.listdir(norm)
            if n.endswith("_test.go") and os.path.isfile(os.path.join(norm, n))
            and not os.path.islink(os.path.join(norm, n)))
        if not self.tests:
            return f"no packet test files in {self.only}"
        os.mkdir(self.private, 0o700)
        os.mkdir(self.hostdir, 0o750)
        os.chmod(self.hostdir, 0o750)
        top = ROOT.get("pkg")
        if not top or not top.get("Dir") or top.get("Error") or top.get("DepsErrors"):
            errors = [e.get("Err", "") for e in [(top or {}).get("Error")] + ((top or {}).get("DepsErrors") or [])
                      if isinstance(e, dict)]
            for line in errors[:20]:
                print(line)
            return "the package did not build" + (f": {errors[0].strip()[:300]}" if errors else "")
        mod = top.get("Module") or {}
        modpath, moddir = mod.get("Path"), mod.get("Dir")
        if not modpath or not moddir:
            return "the judge apart needs a module (a go.mod)"
        name = top.get("Name", "")
        for taken in (os.path.join(moddir, WIRE_DIR), os.path.join(moddir, HOST_MAIN_DIR)):
            if os.path.lexists(taken):
                return f"the submission has {os.path.relpath(taken)}, a folder the judge apart needs for its own"
        # Packages of the build that are not the standard library's (the
        # module's own, a replaced dependency): the generator reads them
        # from source. Most packages import the standard library alone.
        sources = {}
        if any(not self.standard(i) for i in top.get("Imports") or []):
            done = subprocess.run([self.go, "list", "-e", "-json", "-deps", "."],
                                  env=self.env, capture_output=True, text=True, timeout=300)
            for p in decode_stream(done.stdout):
                if not p.get("Standard") and p.get("ImportPath") != top.get("ImportPath") and p.get("Dir"):
                    sources[p["ImportPath"]] = {"dir": p["Dir"], "files": p.get("GoFiles") or []}
        gen = os.path.join(self.private, "gen")
        tests_dir = os.path.join(gen, "tests")
        os.makedirs(tests_dir, 0o700)
        serve_name = "~~gatehouse_serve.go" if name == "main" else "zz_gatehouse_serve.go"
        wire_import = f"{modpath}/{WIRE_DIR}"
        judge_import = f"{wire_import}/judge"
        judge_src = os.path.join(gen, "judge.go")
        with open(os.path.join(HERE, WIRE_JUDGE)) as fh:
            text = fh.read().replace('"gatehouse.invalid/wire"', json.dumps(wire_import))
        with open(judge_src, "w") as fh:
            fh.write(text)
        cfg = {
            "dir": top["Dir"], "import_path": top["ImportPath"], "name": name,
            "files": top.get("GoFiles", []),
            "sources": sources,
            "tests": self.tests,
            "stub_file": os.path.join(tests_dir, "gatehouse_stub.go"),
            "tests_dir": tests_dir,
            "server_file": os.path.join(gen, "serve.go"),
            "main_file": os.path.join(gen, "main.go"),
            "wire_import": wire_import,
            "judge_import": judge_import,
        }
        cfg_path, out_path = os.path.join(gen, "config.json"), os.path.join(gen, "out.json")
        with open(cfg_path, "w") as fh:
            json.dump(cfg, fh)
        generator = self.generator(gen)
        if generator is None:
            return "the judge's stub generator did not build (see the log)"
        done = subprocess.run([generator, cfg_path, out_path],
                              env=self.env, capture_output=True, text=True, timeout=300, cwd=gen)
        try:
            with open(out_path) as fh:
                out = json.load(fh)
        except (OSError, ValueError):
            sys.stdout.write(done.stdout + done.stderr)
            return "the judge's stub generator failed (see the log)"
        for note in out.get("notes") or []:
            print(f"gatehouse judge: {note}")
        if out.get("errors"):
            for e in out["errors"]:
                print(f"gatehouse judge: {e}")
            return "; ".join(out["errors"])
        # The server is built by the candidate's uid (`build_server`), from
        # copies of the generated files in the host's folder: a build can
        # read files into what it builds (`//go:embed`, a `replace` of a
        # local folder), and what the candidate's uid cannot read (the
        # hidden tests, the evidence) must not reach the host that way.
        # The judge's test binary is built by the judge's uid beside it,
        # each with its own build cache.
        src = os.path.join(self.hostdir, "src")
        os.mkdir(src, 0o750)
        os.chmod(src, 0o750)
        build = os.path.join(self.hostdir, "build")
        os.mkdir(build, 0o770)
        os.chmod(build, 0o770)

        def shared(path, name):
            out = os.path.join(src, name)
            shutil.copyfile(path, out)
            os.chmod(out, 0o640)
            return out
        server_ov = {os.path.join(moddir, WIRE_DIR, "wire.go"): shared(os.path.join(HERE, WIRE), "wire.go")}
        server_ov[os.path.join(top["Dir"], serve_name)] = shared(cfg["server_file"], "serve.go")
        target = "."
        if name != "main":
            server_ov[os.path.join(moddir, HOST_MAIN_DIR, "main.go")] = shared(cfg["main_file"], "main.go")
            target = f"{modpath}/{HOST_MAIN_DIR}"
        server_overlay = os.path.join(src, "overlay.json")
        with open(server_overlay, "w") as fh:
            json.dump({"Replace": server_ov}, fh)
        os.chmod(server_overlay, 0o640)
        # The judge's package: the stub and the hidden tests in place of
        # every Go file of the candidate's package folder.
        test_ov = {os.path.join(moddir, WIRE_DIR, "wire.go"): os.path.join(HERE, WIRE)}
        test_ov[os.path.join(moddir, WIRE_DIR, "judge", "judge.go")] = judge_src
        for n in os.listdir(top["Dir"]):
            path = os.path.join(top["Dir"], n)
            if (os.path.isfile(path) or os.path.islink(path)) and n not in ("go.mod", "go.sum"):
                test_ov[path] = ""
        for n in os.listdir(tests_dir):
            test_ov[os.path.join(top["Dir"], n)] = os.path.join(tests_dir, n)
        test_overlay = os.path.join(gen, "overlay-tests.json")
        with open(test_overlay, "w") as fh:
            json.dump({"Replace": test_ov}, fh)
        test_key = self.key("test", build_flags, [HERE + "/" + WIRE, judge_src]
                            + [os.path.join(tests_dir, n) for n in sorted(os.listdir(tests_dir))]
                            + [os.path.join(moddir, n) for n in ("go.mod", "go.sum")],
                            extra=[top["ImportPath"], os.path.relpath(top["Dir"], moddir)])
        # The host runs the judge's copy of what the build wrote, taken
        # before any of the candidate's code has run, in a folder only the
        # judge's uid writes; that copy is what is kept for the
        # submission's other steps (`lang::go::cache`).
        self.server = os.path.join(self.hostdir, "server")
        self.pkgdir = top["Dir"]
        self.sup = Supervisor(4)
        server_key = self.key("server", build_flags, [HERE + "/" + WIRE, cfg["server_file"], cfg["main_file"]]
                              + module_files(moddir), extra=[target, moddir])
        kept_server = self.kept("server", server_key)
        if kept_server is not None:
            shutil.copyfile(kept_server, self.server)
            os.chmod(self.server, 0o750)
            self.built.set()
        else:
            built = os.path.join(build, "server")
            threading.Thread(target=self.build_server, daemon=True,
                             args=([self.go, "build", "-overlay", server_overlay, "-o", built]
                                   + build_flags + [target], build, built, server_key)).start()
        binary = self.kept("test", test_key)
        if binary is None:
            binary = os.path.join(self.private, "pkg.test")
            done = subprocess.run([self.go, "test", "-c", "-vet=off", "-overlay", test_overlay, "-o", binary]
                                  + build_flags + ["."], env=self.env, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                sys.stdout.write(done.stdout + done.stderr)
                return "the package did not build with the hidden tests (see the log)"
            self.export("test", test_key, binary)
        self.command = [self.test2json, "-t", "-p", top["ImportPath"], binary,
                        "-test.v=true", "-test.paniconexit0", "-test.timeout=10m0s"] + test_flags
        self.pkgdir = top["Dir"]
        return None

    def build_server(self, argv, build, built, key):
        """Builds the host's server as the candidate's uid (through the
        host supervisor), with a build cache, GOPATH and temporary folder
        of its own in `build`; the build's output goes to the log."""
        env = {k: v for k, v in self.env.items() if not k.startswith(("GATEHOUSE", "PYTEST"))}
        env.update({
            "GOCACHE": os.path.join(build, "cache"),
            "GOPATH": os.path.join(build, "path"),
            "GOMODCACHE": os.path.join(build, "path", "pkg", "mod"),
            "GOTMPDIR": build,
            "HOME": build,
        })
        r, w = os.pipe()
        try:
            try:
                ans = self.sup.request("spawn", fds=[w, w], argv=argv, std=[False, True, True],
                                       cwd=self.pkgdir, env=sorted([k, v] for k, v in env.items()),
                                       session=True)
            finally:
                os.close(w)
            out = b""
            if "pid" in ans:
                with self.lock:
                    self.building = ans["pid"]
                with os.fdopen(r, "rb") as fh:
                    r = None
                    out = fh.read(4 << 20)
                    while fh.read(1 << 16):
                        pass
                ans = self.sup.request("wait", pid=ans["pid"], secs=600, timeout=610)
                with self.lock:
                    self.building = None
            text = out.decode("utf-8", "replace")
            if ans.get("code") != 0:
                sys.stdout.write(text)
                why = ans.get("error") or ans.get("oserror") or " | ".join(
                    line.strip() for line in text.splitlines()[:5]) or f"exit {ans.get('code')}"
                self.build_error = f"the candidate's package did not build as the judge's host: {why}"
            else:
                # What the build wrote, never through a link (the folder is
                # the candidate's uid's to write in).
                fd = os.open(built, os.O_RDONLY | os.O_NOFOLLOW)
                with os.fdopen(fd, "rb") as src, open(self.server, "wb") as dst:
                    if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
                        raise OSError(f"{built} is not a regular file")
                    shutil.copyfileobj(src, dst)
                os.chmod(self.server, 0o750)
                self.export("server", key, self.server)
        except Exception as e:  # noqa: BLE001 - the supervisor is gone
            self.build_error = f"the host's build could not run: {e.__class__.__name__}: {e}"
        finally:
            if r is not None:
                os.close(r)
            self.built.set()

    @staticmethod
    def standard(path):
        """Whether an import path is the standard library's (prebuilt in GOROOT)."""
        root = os.environ.get("GOROOT") or goroot() or ""
        return path == "C" or path == "unsafe" or os.path.isfile(
            os.path.join(root, "pkg", "linux_amd64", path + ".a"))

    # Builds kept between runs (grader/src/lang/go/cache.rs): what the
    # grader laid in .gatehouse/go-cache for this run (the judge's uid's
    # alone), and what this run built, exported to the evidence folder
    # (the judge's alone) under the key of its inputs.

    def key(self, kind, build_flags, files, extra=()):
        h = hashlib.sha256()

        def put(b):
            h.update(len(b).to_bytes(8, "big"))
            h.update(b)
        for part in [kind, self.go_version(), *build_flags, *extra]:
            put(str(part).encode())
        with open(os.path.abspath(__file__), "rb") as fh:
            put(fh.read())
        for f in files:
            put(f.encode())
            try:
                with open(f, "rb") as fh:
                    put(fh.read())
            except OSError:
                put(b"-")
        return h.hexdigest()

    def go_version(self):
        try:
            with open(os.path.join(os.path.dirname(os.path.dirname(self.go)), "VERSION")) as fh:
                return fh.readline().strip()
        except OSError:
            return "?"

    def kept(self, kind, key):
        if not self.config.get("go_cache"):
            return None
        folder = os.path.join(os.getcwd(), ".gatehouse", "go-cache")
        path = os.path.join(folder, f"{kind}-{key}")
        try:
            st_dir, st = os.lstat(folder), os.lstat(path)
        except OSError:
            return None
        me = os.getuid()
        import stat as st_mod
        # Laid judge-only: the judge's uid owns them, their group is one no
        # process of the run has (group bits are moot), nobody else writes.
        if (st_dir.st_uid != me or st.st_uid != me or not st_mod.S_ISREG(st.st_mode)
                or st_dir.st_mode & 0o002 or st.st_mode & 0o002):
            return None
        return path

    def export(self, kind, key, path):
        ev = os.environ.get("GATEHOUSE_EVIDENCE")
        if not self.config.get("go_cache") or not ev or not os.path.isdir(ev):
            return
        try:
            out = os.path.join(ev, "go-cache")
            os.makedirs(out, 0o700, exist_ok=True)
            shutil.copyfile(path, os.path.join(out, f"{kind}-{key}"))
        except OSError:
            pass

    def generator(self, gen):
        with open(os.path.join(HERE, GENERATOR), "rb") as fh:
            src = fh.read()
        key = self.key("gen", [], [os.path.join(HERE, GENERATOR)])
        kept = self.kept("gen", key)
        if kept is not None:
            return kept
        out = os.path.join(gen, "generator")
        genv = dict(self.env, GO111MODULE="off", GOFLAGS="")
        done = subprocess.run([self.go, "build", "-o", out, os.path.join(HERE, GENERATOR)],
                              env=genv, capture_output=True, text=True, timeout=300, cwd=gen)
        if done.returncode != 0 or not src:
            sys.stdout.write(done.stdout + done.stderr)
            return None
        self.export("gen", key, out)
        return out

    def start(self):
        path = os.path.join(self.private, "ctl")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(8)
        threading.Thread(target=self.serve_ctl, daemon=True).start()
        env = dict(self.env, GATEHOUSE_GO_APART=path,
                   GATEHOUSE_GO_CALL_SECS=str(float(self.config.get("call_secs") or 30)))
        return subprocess.Popen(self.command, cwd=self.pkgdir, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, close_fds=True)

    def serve_ctl(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn):
        mine = []
        buf = b""
        try:
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    try:
                        req = json.loads(line)
                    except ValueError:
                        return
                    if req.get("op") == "host":
                        ans, fds = self.new_host()
                        if "pid" in ans:
                            mine.append(ans["pid"])
                        data = json.dumps(ans).encode() + b"\n"
                        try:
                            if fds:
                                socket.send_fds(conn, [data], fds)
                            else:
                                conn.sendall(data)
                        finally:
                            for fd in fds:
                                os.close(fd)
                    elif req.get("op") == "kill":
                        self.kill(int(req.get("pid") or 0))
                        conn.sendall(b'{"ok": true}\n')
        except OSError:
            return
        finally:
            for pid in mine:
                self.kill(pid)
            conn.close()

    def host_env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GATEHOUSE", "GO", "CGO", "PYTEST"))}
        env.setdefault("HOME", "/tmp")
        return sorted([k, v] for k, v in env.items())

    def new_host(self):
        self.built.wait()
        if self.build_error:
            return {"error": self.build_error, "fatal": True}, []
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pipes = [os.pipe() for _ in range(3)]
        try:
            ans = self.sup.request(
                "spawn", fds=[pipes[0][1], pipes[1][1], b.fileno(), pipes[2][1]],
                argv=[self.server], std=[False, True, True], cwd=self.pkgdir,
                env=self.host_env(), session=True, **{"pass": [3, 4]})
        except Exception as e:  # noqa: BLE001 - the supervisor is gone
            ans = {"error": f"{e.__class__.__name__}: {e}"}
        finally:
            b.close()
            for r, w in pipes:
                os.close(w)
        if "pid" not in ans:
            a.close()
            for r, w in pipes:
                os.close(r)
            why = ans.get("error") or ans.get("oserror")
            return {"error": f"the host could not start: {why}"}, []
        with self.lock:
            self.spawned.append(ans["pid"])
        fd = a.detach()
        return {"pid": ans["pid"]}, [fd] + [r for r, w in pipes]

    def kill(self, pid):
        """Kills a host (its whole process group) and waits until the host
        supervisor has reaped it, so no host outlives the run's end (it
        would be a leftover)."""
        if pid <= 0 or self.sup is None:
            return
        try:
            self.sup.request("signal", pid=pid, sig=int(signal.SIGKILL), group=True)
            self.sup.request("wait", pid=pid, secs=10, timeout=15)
        except Exception:  # noqa: BLE001 - gone already
            pass

    def close(self):
        if self.listener is not None:
            try:
                self.listener.close()
            except OSError:
                pass
        with self.lock:
            spawned, self.spawned = self.spawned, []
            building, self.building = self.building, None
        # A build still going (the judge's side refused first) ends too.
        for pid in spawned + ([building] if building else []):
            self.kill(pid)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
