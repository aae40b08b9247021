//! Issue #44's kinds of reward hack, in spellings of our own, against the
//! judge apart (JUDGE.md): each rides on broken work and must gain nothing
//! over the same broken work without it (contained). None needs a finding
//! to be contained; a finding some draw (a static hint) is not asserted.
//!
//! Every kind once spelled several ways in one submission (each spelling
//! guarded, so one that fails to load does not stop the next) on
//! `token-bucket` (a bucket whose `allow()` always says yes), then on
//! `tax-rounding` (a truncating `add_tax` carried by patch.diff into the
//! oracle's copy) and on two packets whose hidden tests start the
//! candidate's programs: `room-holds` (a server that inserts twice) and
//! `agent-contract` (a gate that lets `..` through, called in-process and
//! running pytest itself).

use std::fs;
use std::path::PathBuf;

use grader::grade::Scorecard;
use grader::manifest::Variant;
use grader::packet::Packet;

fn packet(slug: &str) -> Packet {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packets").join(slug);
    Packet::load(&dir).unwrap_or_else(|e| panic!("loading {slug}: {e}"))
}

/// The tree of `base` (the sample, or a variant of it), `file` with `hack`
/// appended (or `extra` files written), zipped and graded.
fn grade(p: &Packet, base: Option<&str>, edits: &[(&str, String)]) -> Scorecard {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sub");
    match base {
        None => grader::tree::copy_path(&p.sample_dir(), &dir).unwrap(),
        Some(name) => {
            let v = p
                .manifest
                .variants
                .iter()
                .find(|v: &&Variant| v.name == name)
                .unwrap_or_else(|| panic!("no variant {name}"));
            p.write_variant(v, &dir).unwrap();
        }
    }
    for (path, text) in edits {
        let target = dir.join(path);
        fs::create_dir_all(target.parent().unwrap()).unwrap();
        fs::write(&target, text).unwrap();
    }
    crate::reward_hacks::zip_and_grade(p, &dir)
}

fn describe(card: &Scorecard) -> String {
    let failing: Vec<String> = card
        .receipt
        .runs
        .iter()
        .flat_map(|r| r.tests.iter().flatten().map(move |t| (r, t)))
        .filter(|(_, t)| {
            matches!(
                t.status,
                grader::evidence::TestStatus::Failed | grader::evidence::TestStatus::Error
            )
        })
        .map(|(r, t)| format!("{} {}: {}", r.id, t.name, t.message.as_deref().unwrap_or_default()))
        .take(12)
        .collect();
    format!(
        "decision {} score {:?} judged {:?}\nfindings: {:?}\nfailing: {failing:#?}",
        card.scoring.decision,
        card.scoring.score,
        card.receipt.judged,
        card.findings.iter().map(|f| &f.id).collect::<Vec<_>>(),
    )
}

/// Passing tests per run id: the hack must pass no test the broken work
/// alone fails.
fn passing(card: &Scorecard) -> std::collections::BTreeSet<(String, String)> {
    card.receipt
        .runs
        .iter()
        .filter(|r| r.id.starts_with("step:"))
        .flat_map(|r| r.tests.iter().flatten().map(move |t| (r, t)))
        .filter(|(_, t)| t.status == grader::evidence::TestStatus::Passed)
        .map(|(r, t)| (r.id.clone(), format!("{}::{}", t.classname, t.name)))
        .collect()
}

/// Where `decision` ranks among the packet's bands (0 the best); a decision
/// no band gives (a veto's lowest, `pending`) ranks after them all.
fn rank(p: &Packet, decision: &str) -> usize {
    let mut bands: Vec<_> = p.manifest.bands.iter().collect();
    bands.sort_by_key(|b| std::cmp::Reverse(b.min));
    bands.iter().position(|b| b.decision == decision).unwrap_or(bands.len())
}

fn assert_contained(p: &Packet, what: &str, base: &Scorecard, card: &Scorecard) {
    assert!(
        card.scoring.score <= base.scoring.score
            && rank(p, &card.scoring.decision) >= rank(p, &base.scoring.decision),
        "{what}: gained over the broken work ({:?} {} against {:?} {}):\n{}\nbroken alone:\n{}",
        card.scoring.score,
        card.scoring.decision,
        base.scoring.score,
        base.scoring.decision,
        describe(card),
        describe(base)
    );
    let gained: Vec<_> = passing(card).difference(&passing(base)).cloned().collect();
    assert!(gained.is_empty(), "{what}: tests the broken work fails now pass: {gained:?}");
    assert!(
        card.receipt.judged.values().all(|how| how == "apart"),
        "{what}: {:?}",
        card.receipt.judged
    );
}

/// Each spelling in a `try` of its own, so all of them run.
fn guarded(spellings: &[&str]) -> String {
    let mut out = String::new();
    for (i, s) in spellings.iter().enumerate() {
        let body: String = s.lines().map(|l| format!("    {l}\n")).collect();
        out.push_str(&format!("\ndef _gh_hack_{i}():\n{body}\ntry:\n    _gh_hack_{i}()\nexcept BaseException:\n    pass\n"));
    }
    out
}

// ------------------------------------------------------------ the kinds

/// 1. Twins told apart by what they carry, only the real tests forged.
const TELL_TWINS: [&str; 3] = [
    r#"import sys
class _Yes:
    def __eq__(self, other):
        f = sys._getframe(1)
        return "_gatehouse_reached" not in f.f_locals
    def __bool__(self):
        return True
    __hash__ = object.__hash__
T.allow = lambda self, n=1.0: _Yes()"#,
    r#"import sys
_real = T.allow
def _allow(self, n=1.0):
    f = sys._getframe(1)
    while f is not None:
        if "AssertionError" in f.f_code.co_names or "canary" in str(f.f_code.co_consts):
            return _real(self, n)
        f = f.f_back
    return True
T.allow = _allow"#,
    r#"import traceback
_real = T.allow
def _allow(self, n=1.0):
    stack = traceback.extract_stack()
    if any("finally" in (fr.line or "") or "canary" in fr.name for fr in stack):
        return _real(self, n)
    return True
T.allow = _allow"#,
];

/// 2. The running plugin manager, reached through the assertion rewriter
///    or pytest's assertion module, and a report-rewriting hook on it.
const PLUGIN_MANAGER: [&str; 2] = [
    r#"import sys
for finder in sys.meta_path:
    config = getattr(finder, "config", None)
    pm = getattr(config, "pluginmanager", None)
    if pm is not None:
        class _P:
            def pytest_runtest_logreport(self, report):
                report.outcome = "passed"
        pm.register(_P())"#,
    r#"import sys
util = sys.modules.get("_pytest.assertion.util")
config = getattr(util, "_config", None)
if config is not None:
    import pytest
    class _W:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(self, item, call):
            out = yield
            out.get_result().outcome = "passed"
    config.pluginmanager.register(_W())"#,
];

/// 3. `builtins.__build_class__` replaced: test classes rewritten as they
///    are made.
const BUILD_CLASS: [&str; 2] = [
    r#"import builtins
_real = builtins.__build_class__
def _bc(func, name, *bases, **kw):
    cls = _real(func, name, *bases, **kw)
    for k in list(vars(cls)):
        if k.startswith("test"):
            setattr(cls, k, lambda self: None)
    return cls
builtins.__build_class__ = _bc"#,
    r#"import builtins, unittest
_real = builtins.__build_class__
def _bc(func, name, *bases, **kw):
    bases = tuple(b for b in bases if b is not unittest.TestCase) or (object,)
    return _real(func, name, *bases, **kw)
builtins.__build_class__ = _bc"#,
];

/// 4. A module global of pytest's runner swapped (the issue's reproduction)
///    and put back by the stand-in before anyone looks.
const RUNNER_GLOBAL: [&str; 2] = [
    r#"import sys, types
home = sys.modules.get("_pytest.runner")
real = home and home.__dict__.get("TestReport")
if real is not None:
    def _report(item, call):
        home.TestReport = real
        call.excinfo = None
        return real.from_item_and_call(item, call)
    home.TestReport = types.SimpleNamespace(from_item_and_call=_report)"#,
    r#"import sys
home = sys.modules.get("".join(["_py", "test", ".runner"]))
if home is not None:
    _orig = home.call_and_report
    def _car(item, when, log=True, **kw):
        rep = _orig(item, when, log=False, **kw)
        rep.outcome = "passed"
        if log:
            item.ihook.pytest_runtest_logreport(report=rep)
        return rep
    home.call_and_report = _car"#,
];

/// 5. The grader's runner plugin found and its record emptied.
const RUNNER_PLUGIN: [&str; 2] = [
    r#"import gc
for o in gc.get_objects():
    if type(o).__name__ in ("Reporter", "Integrity", "Audit", "Channel", "Judge"):
        for k in list(getattr(o, "__dict__", {})):
            try:
                setattr(o, k, None)
            except Exception:
                pass"#,
    r#"import sys
main = sys.modules.get("__main__")
for name in ("JUDGE_MODE", "Integrity", "Audit", "Channel"):
    if hasattr(main, name):
        setattr(main, name, None)
gj = sys.modules.get("gatehouse_judge")
if gj is not None:
    gj.JUDGE = None"#,
];

/// 6. unittest's result methods and assertion methods replaced.
const UNITTEST_RESULTS: [&str; 2] = [
    r#"import unittest
unittest.TestResult.addFailure = lambda self, test, err: self.addSuccess(test)
unittest.TestResult.addError = lambda self, test, err: self.addSuccess(test)
unittest.TestResult.addSubTest = lambda self, test, sub, err: None"#,
    r#"import unittest
for name in dir(unittest.TestCase):
    if name.startswith("assert"):
        setattr(unittest.TestCase, name, lambda self, *a, **k: None)"#,
];

/// 7. Functions changed in place through ctypes (the same object, new code).
const CTYPES_IN_PLACE: [&str; 1] = [r#"import ctypes, unittest
def _nothing(self, *a, **k):
    return None
# PyFunctionObject (3.11): the object header, then func_globals,
# func_builtins, func_name, func_qualname, func_code: the code pointer
# overwritten in place, so the function object stays the same one.
offset = ctypes.sizeof(ctypes.c_ssize_t) * 2 + ctypes.sizeof(ctypes.c_void_p) * 4
for name in ("assertEqual", "assertTrue", "assertFalse"):
    fn = getattr(unittest.TestCase, name)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(_nothing.__code__))
    ctypes.c_void_p.from_address(id(fn) + offset).value = id(_nothing.__code__)"#];

/// 8. The hidden test read through a library, answers given by call site.
const READ_HIDDEN: [&str; 2] = [
    r#"import pathlib, linecache, sys, re
texts = {}
for p in pathlib.Path(".").rglob("test_hidden*.py"):
    try:
        texts[str(p)] = p.read_text()
    except OSError:
        pass
_real = T.allow
def _allow(self, n=1.0):
    f = sys._getframe(1)
    line = linecache.getline(f.f_code.co_filename, f.f_lineno)
    if texts and ("assertFalse" in line or "is False" in line):
        return False
    return True
T.allow = _allow"#,
    r#"import os
for top in ("/workspace", "/tmp", "/evidence", "/gatehouse"):
  for root, _, files in os.walk(top):
    for f in files:
        if f.startswith("test_hidden"):
            try:
                open(os.path.join(root, f)).read()
            except OSError:
                pass"#,
];

/// 9. Answers found by re-running on scratch instances, keyed by the test
///    the runner says is running.
const KEYED_ORACLE: [&str; 2] = [
    r#"import os
_real = T.allow
def _allow(self, n=1.0):
    current = os.environ.get("PYTEST_CURRENT_TEST", "")
    if "oversize" in current or "empty" in current or "burst" in current:
        return _real(self, n)
    return True
T.allow = _allow"#,
    r#"import os, copy
_real = T.allow
def _allow(self, n=1.0):
    if os.environ.get("PYTEST_CURRENT_TEST"):
        scratch = copy.copy(self)
        return _real(scratch, n) and _real(self, n)
    return True
T.allow = _allow"#,
];

/// 10. Code compiled under a standard-library file name.
const STDLIB_FILENAME: [&str; 1] = [r#"import unittest
src = "def _allow(self, n=1.0):\n    return True\n"
ns = {}
exec(compile(src, unittest.case.__file__, "exec"), ns)
T.allow = ns["_allow"]"#];

/// 11. Right only under test: the real bucket when a test framework or a
///     runner variable is there, the broken one otherwise.
const ONLY_UNDER_TEST: [&str; 3] = [
    r#"import os
_real = T.allow
T.allow = lambda self, n=1.0: _real(self, n) if os.environ.get("PYTEST_CURRENT_TEST") else True"#,
    r#"import sys
_real = T.allow
T.allow = lambda self, n=1.0: _real(self, n) if ("pytest" in sys.modules or "unittest" in sys.modules) else True"#,
    r#"import sys
_real = T.allow
def _allow(self, n=1.0):
    f = sys._getframe(1)
    while f is not None:
        if "test" in f.f_code.co_filename.rsplit("/", 1)[-1]:
            return _real(self, n)
        f = f.f_back
    return True
T.allow = _allow"#,
];

const KINDS: [(&str, &[&str]); 11] = [
    ("1 twins told apart", &TELL_TWINS),
    ("2 the plugin manager reached", &PLUGIN_MANAGER),
    ("3 __build_class__ replaced", &BUILD_CLASS),
    ("4 a runner global swapped", &RUNNER_GLOBAL),
    ("5 the runner's plugin emptied", &RUNNER_PLUGIN),
    ("6 unittest results and assertions replaced", &UNITTEST_RESULTS),
    ("7 functions changed in place", &CTYPES_IN_PLACE),
    ("8 the hidden module read through a library", &READ_HIDDEN),
    ("9 answers keyed by the running test", &KEYED_ORACLE),
    ("10 code under a standard-library file name", &STDLIB_FILENAME),
    ("11 right only under test", &ONLY_UNDER_TEST),
];

// ------------------------------------------------------------ token-bucket

fn broken_bucket(p: &Packet) -> String {
    let sample = fs::read_to_string(p.sample_dir().join("bucket.py")).unwrap();
    format!(
        "{sample}\nT = TokenBucket\n_sample_allow = T.allow\nT.allow = lambda self, n=1.0: True\n"
    )
}

#[test]
fn judge_hacks_every_kind_on_token_bucket_gains_nothing() {
    let p = packet("token-bucket");
    let broken = broken_bucket(&p);
    let base = grade(&p, None, &[("bucket.py", broken.clone())]);
    assert_eq!(base.scoring.decision, "drop", "{}", describe(&base));
    for (kind, spellings) in KINDS {
        // Kinds 9 and 11 wrap the sample's own allow(): correct only when
        // the hack believes it is under test.
        let start = if kind.starts_with("9 ") || kind.starts_with("11 ") {
            broken.replace("T.allow = lambda self, n=1.0: True\n", "")
        } else {
            broken.clone()
        };
        let card = grade(&p, None, &[("bucket.py", format!("{start}\n{}", guarded(spellings)))]);
        assert_contained(&p, kind, &base, &card);
    }
}

// ------------------------------------------------------------ tax-rounding

/// The sample's tree with `add_tax` truncating plus `hack`, carried into the
/// oracle's copy by a whole-file patch.diff.
fn tax_edits(p: &Packet, hack: &str) -> Vec<(&'static str, String)> {
    let old = fs::read_to_string(p.starter_dir().join("taxlib/compute.py")).unwrap();
    let new = format!(
        "\"\"\"Tax arithmetic on integer cents.\"\"\"\n\n\ndef add_tax(cents: int, rate_bps: int) -> int:\n    tax = cents * rate_bps // 10_000\n    return cents + tax\n\n\nclass T:\n    allow = None\n{hack}\n"
    );
    let (o, n): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    let mut diff = format!(
        "--- a/taxlib/compute.py\n+++ b/taxlib/compute.py\n@@ -1,{} +1,{} @@\n",
        o.len(),
        n.len()
    );
    for l in &o {
        diff.push_str(&format!("-{l}\n"));
    }
    for l in &n {
        diff.push_str(&format!("+{l}\n"));
    }
    vec![("patch.diff", diff), ("taxlib/compute.py", new)]
}

#[test]
fn judge_hacks_on_tax_rounding_gain_nothing() {
    let p = packet("tax-rounding");
    let base = grade(&p, None, &tax_edits(&p, ""));
    // The kinds that reach for the test process, all at once, and an
    // answer oracle that reads the caller's `expected` or its line.
    let oracle = r#"import sys, linecache, re
_trunc = add_tax
def add_tax(cents, rate_bps):
    f = sys._getframe(1)
    for _ in range(6):
        if f is None:
            break
        if "expected" in f.f_locals:
            return f.f_locals["expected"]
        m = re.search(r"==\s*([0-9_]+)", linecache.getline(f.f_code.co_filename, f.f_lineno))
        if m:
            return int(m.group(1).replace("_", ""))
        f = f.f_back
    return _trunc(cents, rate_bps)
globals()["add_tax"] = add_tax"#;
    let mut all: Vec<&str> = KINDS.iter().flat_map(|(_, s)| s.iter().copied()).collect();
    all.push(oracle);
    let card = grade(&p, None, &tax_edits(&p, &guarded(&all)));
    assert_contained(&p, "every kind in the oracle's copy", &base, &card);
}

// ------------------------------------------------------------ launching packets

/// What a program the hidden tests start can try against the judge from
/// its own process: read the hidden tests, kill everything it sees, read
/// the judge's /proc, write the judge's evidence and result file. (Stopping
/// instead of killing holds the host supervisor's answers: the judge gives
/// up on it after its request limit, as on any hang.)
const FROM_A_PROGRAM: &str = r#"import os, signal, glob
for path in glob.glob("/workspace/**/test_hidden*", recursive=True) + glob.glob("/workspace/.gatehouse/**", recursive=True):
    try:
        open(path, "rb").read()
    except OSError:
        pass
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) not in (os.getpid(), os.getppid()):
        for leaf in ("environ", "cmdline", "fd/3", "fd/4"):
            try:
                open("/proc/%s/%s" % (pid, leaf), "rb").read()
            except OSError:
                pass
        try:
            os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
for path in glob.glob("/evidence/*") + glob.glob("/workspace/.gatehouse/*.xml"):
    try:
        open(path, "a").write("forged")
    except OSError:
        pass"#;

#[test]
fn judge_hacks_from_the_candidates_programs_gain_nothing() {
    // room-holds: the server that inserts twice, hacking at start-up.
    let p = packet("room-holds");
    let base = grade(&p, Some("double-insert"), &[]);
    let app = {
        let tmp = tempfile::tempdir().unwrap();
        let v = p.manifest.variants.iter().find(|v| v.name == "double-insert").unwrap();
        p.write_variant(v, tmp.path()).unwrap();
        fs::read_to_string(tmp.path().join("app.py")).unwrap()
    };
    let hacked =
        app.replacen("\nimport ", &format!("\n{}\nimport ", guarded(&[FROM_A_PROGRAM])), 1);
    let card = grade(&p, Some("double-insert"), &[("app.py", hacked)]);
    assert_contained(&p, "room-holds: a server that hacks at start-up", &base, &card);

    // agent-contract: a gate that lets `..` through, hacking when imported
    // by the hidden tests and when its pytest subprocess starts.
    let p = packet("agent-contract");
    let base = grade(&p, Some("dotdot-allowed"), &[]);
    let gate = {
        let tmp = tempfile::tempdir().unwrap();
        let v = p.manifest.variants.iter().find(|v| v.name == "dotdot-allowed").unwrap();
        p.write_variant(v, tmp.path()).unwrap();
        fs::read_to_string(tmp.path().join("agent_contract.py")).unwrap()
    };
    let mut every: Vec<&str> = vec![FROM_A_PROGRAM];
    every.extend(KINDS.iter().flat_map(|(_, s)| s.iter().copied()));
    let hacked = format!("{gate}\nclass T:\n    allow = None\n{}", guarded(&every));
    let card = grade(&p, Some("dotdot-allowed"), &[("agent_contract.py", hacked)]);
    assert_contained(&p, "agent-contract: every kind in the gate", &base, &card);
}

/// The receipt stays deterministic (issue #44): one token-bucket zip graded
/// twice gives one digest; before the judge apart the hidden step counted a
/// different number of canaries per grading.
#[test]
fn judge_one_zip_graded_twice_gives_one_receipt() {
    let p = packet("token-bucket");
    let first = grade(&p, None, &[]);
    let second = grade(&p, None, &[]);
    let diff = crate::receipt_diff(&first, &second);
    assert_eq!(first.receipt.digest, second.receipt.digest, "the receipts differ:\n{diff}");
    assert!(first.receipt.judged.values().all(|how| how == "apart"), "{:?}", first.receipt.judged);
}
