//! `packet check` on the `check-demo` fixture and copies of it: a good
//! packet passes; canaries that cannot fail, a broken copy and classic
//! packet mistakes are named; alternates (trees and diffs) are graded and
//! what accuses them is said; the starter runs as a candidate receives it;
//! failing hidden tests map to the ids they prove.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use grader::check::{check_packet, check_packet_with};
use grader::packet::Packet;
use grader::tree::copy_path;

use crate::detectors::{fixture, grader};

#[test]
fn check_packet_passes_the_good_fixture() {
    let report = check_packet(grader(), &fixture("check-demo"));
    let failed = failures(&report);
    assert!(report.ok(), "failed items: {failed:#?}");
    let warnings: Vec<String> =
        report.warnings().map(|i| format!("{}: {}", i.name, i.detail)).collect();
    assert!(warnings.is_empty(), "the fixture lints clean: {warnings:#?}");
    let names: Vec<&str> = report.items.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "manifest is valid",
            "every hidden test names the sentence of the brief it enforces",
            "every quote the hidden tests cite occurs in the brief",
            "every failure id has a known-bad variant",
            "the starter is red",
            "the sample passes the test command",
            "the hidden tests' ids are recorded",
            "the canaries of step hidden fail on the sample",
            "[proves.hidden] names tests the step runs",
            "no hidden test is skipped on the sample",
            "the sample grades clean",
            "variant buggy triggers exactly hidden-fails",
            "variant buggy's failing hidden tests prove only its ids",
            "variant no-notes triggers exactly notes-missing",
            "variant no-notes's failing hidden tests prove only its ids",
            "mutant minus is killed by step hidden",
            "the hidden tests' mutants",
        ]
    );
    let m = report.mutants.expect("the mutant counts");
    assert_eq!((m.killed, m.survived, m.explained), (1, 0, 0));
}

/// The platform's background self-test measures its calibration apart
/// (`check_packet_with(.., true)`), sharing its mutant runs with the
/// self-test's gradings: it neither waits for nor leaves the
/// grader's calibration of the version, which a grading of the version at
/// normal priority meanwhile measures itself (before, such a grading
/// waited behind the starved idle-priority measurement). The grader's own
/// calibration is kept as before.
#[test]
fn a_self_test_apart_leaves_the_graders_calibration_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("check-demo");
    copy_path(&fixture("check-demo"), &dir).unwrap();
    // A version of its own: no other test calibrates this digest.
    let toml = dir.join("packet.toml");
    fs::write(&toml, fs::read_to_string(&toml).unwrap() + "\n# measured apart\n").unwrap();
    let packet = Packet::load(&dir).unwrap();
    let report = check_packet_with(grader(), &dir, true);
    assert!(report.ok(), "failed items: {:#?}", failures(&report));
    let recorded = report.calibration.as_ref().expect("a recorded calibration");
    assert!(recorded.expected.values().any(|ids| !ids.is_empty()), "{recorded:?}");
    assert!(!grader().holds_calibration(&packet.digest), "measured apart, yet kept");
    // The calibration ran the mutant `minus` on the sample through the
    // self-test's memo: the grading of the sample reuses that run, and
    // variant buggy (only calc.py changes) reuses it again. no-notes
    // removes a file: another tree, a run of its own.
    assert_eq!(report.reused_runs, 2, "the calibration's mutant run was not shared");
    // The grader's own measurement is kept for its gradings.
    let _ = grader().calibration(&packet);
    assert!(grader().holds_calibration(&packet.digest));
}

/// The environment probe is each caller's own run: a grading at normal
/// priority never waits behind a background self-test's probe that idle
/// priority starves (CI once timed out a grading that way: the probe ran
/// under the tool cache's lock). Here the idle prober starts first, pinned
/// to one CPU that is then kept busy at normal priority until the second
/// prober is done, and the second must finish while the first is still
/// starved (a minute of that ends the starvation and fails the test).
#[test]
fn a_probe_never_waits_behind_a_starved_one() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};
    let fresh = Arc::new(grader::grade::Grader::for_host().unwrap());
    let idle_done = Arc::new(AtomicBool::new(false));
    let idle = {
        let (g, done) = (fresh.clone(), idle_done.clone());
        std::thread::spawn(move || {
            pin_to_the_first_cpu();
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: sets this thread's policy; the struct outlives the call.
            let set = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
            assert_eq!(set, 0, "sched_setscheduler(SCHED_IDLE)");
            let probed = g.probe(&[]);
            done.store(true, Ordering::SeqCst);
            probed.map(|p| p.python)
        })
    };
    // Into its probe run (a sandboxed interpreter takes far longer).
    std::thread::sleep(Duration::from_millis(30));
    // The idle prober and its sandboxed children (affinity is inherited)
    // run on the first CPU only, so one spinner there starves them; the
    // normal-priority prober runs anywhere.
    let stop = Arc::new(AtomicBool::new(false));
    let busy: Vec<_> = (0..1)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                pin_to_the_first_cpu();
                let started = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    if started.elapsed() > Duration::from_secs(60) {
                        return false;
                    }
                    std::hint::spin_loop();
                }
                true
            })
        })
        .collect();
    let normal = fresh.probe(&[]);
    let idle_was_done = idle_done.load(Ordering::SeqCst);
    stop.store(true, Ordering::Relaxed);
    let starved_throughout = busy.into_iter().all(|t| t.join().unwrap());
    let idle = idle.join().unwrap();
    assert!(
        starved_throughout && !idle_was_done,
        "the normal-priority probe waited for the starved one"
    );
    let (normal, idle) = (normal.unwrap().python, idle.unwrap());
    assert!(normal.is_some() && normal == idle, "{normal:?} against {idle:?}");
}

/// Pins the calling thread (and what it starts) to the first CPU it may
/// run on.
fn pin_to_the_first_cpu() {
    // SAFETY: cpu_set_t is plain data; both calls get a valid pointer and
    // its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set), 0);
        let first = (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &set))
            .expect("a CPU to run on");
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(first, &mut set);
        let set_ok = libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
        assert_eq!(set_ok, 0, "sched_setaffinity");
    }
}

#[test]
fn check_packet_fails_hidden_tests_whose_canaries_cannot_fail_on_the_sample() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = check_demo_copy(tmp.path());
    let hidden = fs::read_dir(root.join("hidden")).unwrap().next().unwrap().unwrap().path();
    let name = hidden.file_name().unwrap().to_string_lossy().into_owned();
    // Tests that never pass on the sample (skipped before any assertion):
    // no twin of theirs fails beside a passing test there, so no canary can
    // be planted. (A test that returns before its assertion passes, and its
    // twin fails as the changed assertion never ran: that one is covered.)
    write(
        &root,
        &format!("hidden/{name}"),
        "import pytest\n\nfrom calc import add\n\n\ndef test_add_small():\n    pytest.skip('not today')\n    assert add(1, 2) == 3\n\n\ndef test_add_negative():\n    pytest.skip('nor today')\n    assert add(-1, -2) == -3\n",
    );
    let report = check_packet(grader(), &root);
    let item = report
        .items
        .iter()
        .find(|i| i.name == "the canaries of step hidden fail on the sample")
        .unwrap_or_else(|| panic!("no canary item: {:#?}", report.items));
    assert!(!item.ok && !item.warning, "{item:#?}");
    assert!(
        item.detail.contains("no twin of the hidden tests fails on the sample")
            && item.detail.contains("test_add_small")
            && item.detail.contains("test_add_negative"),
        "{}",
        item.detail
    );
    assert!(!report.ok());
}

#[test]
fn check_packet_fails_a_broken_copy() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = check_demo_copy(tmp.path());
    // A variant that expects an id it does not trigger.
    replace_in_manifest(
        &root,
        "expect = [\"notes-missing\"]",
        "expect = [\"notes-missing\", \"hidden-fails\"]",
    );
    // A starter that is already green.
    fs::copy(root.join("sample/calc.py"), root.join("starter/calc.py"))
        .expect("greening the starter");

    let report = check_packet(grader(), &root);
    assert!(!report.ok());
    let failed: BTreeMap<&str, &str> =
        report.failures().map(|i| (i.name.as_str(), i.detail.as_str())).collect();
    assert_eq!(
        failed.keys().copied().collect::<Vec<_>>(),
        ["the starter is red", "variant no-notes triggers exactly notes-missing, hidden-fails"],
        "{failed:#?}"
    );
    assert_eq!(
        failed["variant no-notes triggers exactly notes-missing, hidden-fails"],
        "missing [hidden-fails], unexpected []"
    );
}

#[test]
fn packet_check_warns_of_classic_packet_mistakes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = check_demo_copy(tmp.path());
    // No budget, no stop rule, a hidden expectation and the sample's fix
    // pasted into the prompt, and a failure that no longer matters.
    let toml = fs::read_to_string(root.join("packet.toml")).expect("packet.toml");
    let toml = toml.replace("[budgets]\ntime_box_minutes = 30\n", "");
    let cap = toml.find("[[cap]]").expect("a cap");
    let toml = format!(
        "{}{}",
        &toml[..cap],
        &toml[toml[cap..].find("\n\n").map_or(toml.len(), |e| cap + e)..]
    );
    fs::write(root.join("packet.toml"), toml).expect("writing packet.toml");
    let sample = fs::read_to_string(root.join("sample/calc.py")).expect("sample");
    let fix = sample
        .lines()
        .find(|l| l.trim_start().starts_with("return"))
        .expect("a return line")
        .trim()
        .to_string();
    let prompt = format!(
        "# Check demo\n\nFix `add` in `calc.py`.\n\n    assert add(-1, -2) == -3\n    {fix}\n"
    );
    fs::write(root.join("prompt.md"), prompt).expect("writing prompt.md");

    let report = check_packet(grader(), &root);
    // Warnings never fail a check.
    assert!(report.ok(), "{:#?}", report.failures().collect::<Vec<_>>());
    let warnings: BTreeMap<&str, &str> =
        report.warnings().map(|i| (i.name.as_str(), i.detail.as_str())).collect();
    assert_eq!(
        warnings.keys().copied().collect::<Vec<_>>(),
        [
            "the packet publishes a budget",
            "the prompt and starter do not leak the answer",
            "the prompt states a stop rule or budget",
            "variant no-notes is kept from the best decision"
        ],
        "{warnings:#?}"
    );
    let leak = warnings["the prompt and starter do not leak the answer"];
    assert!(
        leak.contains("hidden/test_hidden.py: `assert add(-1, -2) == -3` appears in prompt.md"),
        "{leak}"
    );
}

/// A self-test's failing items, as "name: detail".
pub(crate) fn failures(report: &grader::check::CheckReport) -> Vec<String> {
    report.failures().map(|i| format!("{}: {}", i.name, i.detail)).collect()
}

/// A hidden test the packet's own sample run skips scores no candidate (a
/// skip is never counted): `packet check` names it as a problem of the
/// packet (issue #48). On the good fixture the same item holds
/// (`check_packet_passes_the_good_fixture`).
#[test]
fn a_hidden_test_the_sample_skips_is_a_problem_of_the_packet() {
    let tmp = tempfile::tempdir().unwrap();
    let root = check_demo_copy(tmp.path());
    let hidden = fs::read_to_string(root.join("hidden/test_hidden.py")).unwrap();
    write(
        &root,
        "hidden/test_hidden.py",
        &format!(
            "import pytest\n{hidden}\n\n@pytest.mark.skip(reason=\"slow on CI\")\ndef test_add_large():\n    assert add(10**6, 1) == 10**6 + 1\n"
        ),
    );
    let packet = Packet::load(&root).unwrap();
    let card = grader()
        .grade_overlay(
            &packet,
            &packet.sample_dir(),
            &packet.manifest.sample.times,
            &grader::grade::GradeOptions::default(),
        )
        .unwrap();
    let item =
        grader::check::skipped_on_sample(&packet.manifest, &card).expect("a step of hidden tests");
    assert!(!item.ok && !item.warning, "{item:?}");
    assert!(
        item.detail.starts_with("1 hidden test(s) skipped")
            && item.detail.contains("hidden: test_hidden::test_add_large (")
            && item.detail.contains("slow on CI"),
        "{}",
        item.detail
    );
    // The sample still grades clean: the skip is the packet's, not counted
    // against anyone.
    assert!(card.findings.is_empty(), "{:?}", card.findings);
}

/// A copy of the fixture packet `name` to edit, at `<tmp>/<name>`.
pub(crate) fn fixture_copy(tmp: &Path, name: &str) -> std::path::PathBuf {
    let root = tmp.join(name);
    copy_path(&fixture(name), &root).expect("copying the packet");
    root
}

/// A copy of `check-demo` to edit, at `<tmp>/check-demo`.
pub(crate) fn check_demo_copy(tmp: &Path) -> std::path::PathBuf {
    fixture_copy(tmp, "check-demo")
}

/// Replaces `from`, which the copy's manifest must hold, with `to`.
pub(crate) fn replace_in_manifest(root: &Path, from: &str, to: &str) {
    let toml = fs::read_to_string(root.join("packet.toml")).expect("reading the manifest");
    assert!(toml.contains(from), "the manifest has no {from:?}");
    write(root, "packet.toml", &toml.replace(from, to));
}

/// Appends `tables` to the copy's manifest.
pub(crate) fn append_to_manifest(root: &Path, tables: &str) {
    let toml = fs::read_to_string(root.join("packet.toml")).expect("reading the manifest");
    write(root, "packet.toml", &format!("{toml}{tables}"));
}

pub(crate) fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().expect("a parent")).expect("creating folders");
    fs::write(path, text).expect("writing a packet file");
}

#[test]
fn check_packet_grades_each_alternate_and_names_what_accuses_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = check_demo_copy(tmp.path());
    // Honest, written another way: passes and draws nothing.
    write(
        &root,
        "alternates/clean/calc.py",
        "def add(a, b):\n    total = a\n    total += b\n    return total\n",
    );
    write(&root, "alternates/clean/NOTES.md", "Rewrote add with an accumulator.\n");
    // Honest code, but the notes the rubric asks for are missing: notes-missing fires.
    write(&root, "alternates/terse/calc.py", "def add(a, b):\n    return sum((a, b))\n");
    // Not honest at all: the test command fails and a hidden test fails.
    write(&root, "alternates/wrong/calc.py", "def add(a, b):\n    return a * b\n");
    write(&root, "alternates/wrong/NOTES.md", "Multiplied.\n");

    let report = check_packet(grader(), &root);
    let items: BTreeMap<&str, (bool, &str)> =
        report.items.iter().map(|i| (i.name.as_str(), (i.ok, i.detail.as_str()))).collect();
    assert!(!report.ok());
    assert!(items["alternate clean grades clean"].0, "{items:#?}");
    let terse = items["alternate terse grades clean"];
    assert!(!terse.0);
    assert!(
        terse.1.contains("finding notes-missing (NOTES.md: no such file)")
            || terse.1.contains("finding notes-missing ("),
        "{}",
        terse.1
    );
    let wrong = items["alternate wrong grades clean"];
    assert!(!wrong.0);
    // Failing the candidate's test command is a warning (honest work may
    // keep the tree red); what grading finds is the failure.
    let warned = items["alternate wrong passes the test command"];
    assert!(
        !warned.0 && warned.1.contains("`python3 -m pytest -q -p no:cacheprovider` does not pass"),
        "{}",
        warned.1
    );
    assert!(report.warnings().any(|w| w.name == "alternate wrong passes the test command"));
    assert!(
        wrong.1.contains("finding hidden-fails (") && wrong.1.contains("test_add_small"),
        "{}",
        wrong.1
    );
    // Alternates come after the variants, in name order; nothing else failed.
    let failed: Vec<&str> = report.failures().map(|i| i.name.as_str()).collect();
    assert_eq!(failed, ["alternate terse grades clean", "alternate wrong grades clean"]);
    let names: Vec<&str> = report.items.iter().map(|i| i.name.as_str()).collect();
    let at = |n: &str| names.iter().position(|x| *x == n).unwrap_or_else(|| panic!("no item {n}"));
    assert!(
        at("variant no-notes triggers exactly notes-missing") < at("alternate clean grades clean")
    );
    assert!(at("alternate clean grades clean") < at("alternate terse grades clean"));
    // The JSON report carries the same items.
    let json = serde_json::to_value(&report).expect("report to JSON");
    let listed = json["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| i["name"].as_str().is_some_and(|n| n.starts_with("alternate ")))
        .count();
    // Three "grades clean" items and one warning ("wrong" fails the test command).
    assert_eq!(listed, 4);

    // With only the clean one left, the self-test passes.
    fs::remove_dir_all(root.join("alternates/terse")).expect("removing");
    fs::remove_dir_all(root.join("alternates/wrong")).expect("removing");
    let report = check_packet(grader(), &root);
    let failed = failures(&report);
    assert!(report.ok(), "{failed:#?}");
    assert!(report.items.iter().any(|i| i.name == "alternate clean grades clean" && i.ok));
}

#[test]
fn check_packet_refuses_a_file_or_link_among_alternates() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = check_demo_copy(tmp.path());
    write(&root, "alternates/README", "not an alternate\n");
    let report = check_packet(grader(), &root);
    let failed = failures(&report);
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert!(failed[0].contains("alternates/README: an alternate is a folder or a `<name>.diff` laid over the starter, not another file or a link"), "{failed:#?}");
    fs::remove_file(root.join("alternates/README")).expect("removing");
    std::os::unix::fs::symlink(tmp.path(), root.join("alternates/outside")).expect("a symlink");
    let report = check_packet(grader(), &root);
    assert!(
        report.failures().any(|i| i.detail.contains("not a file or a link")
            || i.detail.contains("a packet may not contain links")),
        "a link out of the packet is refused, never followed"
    );
}

/// A diff alternate: the starter's `calc.py` edited, a new `NOTES.md`.
const ALTERNATE_DIFF: &str = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return b + a\n--- /dev/null\n+++ b/NOTES.md\n@@ -0,0 +1 @@\n+Swapped the sign and the operands.\n";

#[test]
fn check_packet_grades_an_alternate_given_as_a_diff_over_the_received_tree() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = check_demo_copy(tmp.path());
    // Alone, and with a folder of the same name laid first: the diff
    // patches the folder's file, not the starter's.
    write(&root, "alternates/patched.diff", ALTERNATE_DIFF);
    write(
        &root,
        "alternates/mixed/calc.py",
        "def add(a, b):\n    return a - b\n\n\ndef unused():\n    return 0\n",
    );
    write(&root, "alternates/mixed.diff", ALTERNATE_DIFF);
    // A diff whose hunk does not match the tree it patches.
    write(
        &root,
        "alternates/stale.diff",
        &ALTERNATE_DIFF.replace("-    return a - b", "-    return a + b"),
    );
    let packet = Packet::load(&root).expect("the diffs parse, so the packet loads");
    assert_eq!(packet.alternates().expect("alternates"), ["mixed", "patched", "stale"]);
    let tree = tmp.path().join("mixed-tree");
    copy_path(&root.join("starter"), &tree).expect("a received tree");
    packet.write_alternate("mixed", &tree).expect("laying mixed");
    assert_eq!(
        fs::read_to_string(tree.join("calc.py")).expect("calc.py"),
        "def add(a, b):\n    return b + a\n\n\ndef unused():\n    return 0\n"
    );
    assert_eq!(
        fs::read_to_string(tree.join("NOTES.md")).expect("NOTES.md"),
        "Swapped the sign and the operands.\n"
    );
    assert!(tree.join("test_calc.py").is_file(), "the received tree stays under the alternate");

    let report = check_packet(grader(), &root);
    let items: BTreeMap<&str, (bool, &str)> =
        report.items.iter().map(|i| (i.name.as_str(), (i.ok, i.detail.as_str()))).collect();
    assert!(items["alternate patched grades clean"].0, "{items:#?}");
    assert!(items["alternate mixed grades clean"].0, "{items:#?}");
    let stale = items["alternate stale grades clean"];
    assert!(!stale.0);
    assert!(
        stale.1.contains("building the alternate: ") && stale.1.contains("alternates/stale.diff: calc.py: line 2: expected `    return a + b`, found `    return a - b`"),
        "{}",
        stale.1
    );
    let failed: Vec<&str> = report.failures().map(|i| i.name.as_str()).collect();
    assert_eq!(failed, ["alternate stale grades clean"]);
}

#[test]
fn a_malformed_or_escaping_alternate_diff_is_refused_when_the_packet_loads() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = check_demo_copy(tmp.path());
    let refused = |text: &str| {
        write(&root, "alternates/bad.diff", text);
        let e = Packet::load(&root).expect_err("refused").to_string();
        fs::remove_file(root.join("alternates/bad.diff")).expect("removing");
        e
    };
    let e = refused("I rewrote add.\n");
    assert!(
        e.ends_with("alternates/bad.diff: line 1: `I rewrote add.` is not part of a unified diff"),
        "{e}"
    );
    let e = refused("--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n");
    assert!(e.ends_with("alternates/bad.diff: line 5: the hunk ends early"), "{e}");
    for (path, shown) in [
        ("b/../x.py", "b/../x.py"),
        ("/etc/passwd", "/etc/passwd"),
        ("b/sub/../../x.py", "b/sub/../../x.py"),
    ] {
        let e = refused(&format!("--- /dev/null\n+++ {path}\n@@ -0,0 +1 @@\n+x = 1\n"));
        assert!(
            e.ends_with(&format!(
                "alternates/bad.diff: `{shown}` is not a relative path inside the tree"
            )),
            "{path}: {e}"
        );
    }
    // A variant's diff is held to the same rule.
    write(&root, "variants/buggy.diff", "--- a/calc.py\n+++ ../calc.py\n@@ -1 +1 @@\n-x\n+y\n");
    let e = Packet::load(&root).expect_err("refused").to_string();
    assert!(
        e.ends_with("variants/buggy.diff: `../calc.py` is not a relative path inside the tree"),
        "{e}"
    );
    fs::remove_file(root.join("variants/buggy.diff")).expect("removing");
    // Quiet: a well-formed diff, and a hidden file beside it, load.
    write(&root, "alternates/good.diff", ALTERNATE_DIFF);
    write(&root, "alternates/.gitkeep", "");
    assert_eq!(Packet::load(&root).expect("loads").alternates().expect("alternates"), ["good"]);
    // Another file is no alternate.
    write(&root, "alternates/good.patch", ALTERNATE_DIFF);
    let e = Packet::load(&root).expect_err("refused").to_string();
    assert!(
        e.contains("alternates/good.patch: an alternate is a folder or a `<name>.diff`"),
        "{e}"
    );
}

#[test]
fn check_packet_runs_the_starter_as_a_candidate_receives_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = check_demo_copy(tmp.path());
    // A starter tool that rejects files it does not know, like a frozen
    // contract checker that forgot the platform's files.
    write(
        &root,
        "starter/test_tree.py",
        "import os\n\n\ndef test_only_known_files():\n    assert 'GATEHOUSE_PIN.toml' not in os.listdir('.'), os.listdir('.')\n",
    );
    let report = check_packet(grader(), &root);
    let failed: BTreeMap<&str, &str> =
        report.failures().map(|i| (i.name.as_str(), i.detail.as_str())).collect();
    assert!(failed.contains_key("the sample passes the test command"), "{failed:#?}");
    // Taught about the platform's files, the same starter passes.
    write(
        &root,
        "starter/test_tree.py",
        "import os\n\nPLATFORM = {'GATEHOUSE_PIN.toml', 'PROMPT.md'}\n\n\ndef test_only_known_files():\n    assert PLATFORM <= set(os.listdir('.')), os.listdir('.')\n",
    );
    let report = check_packet(grader(), &root);
    let failed = failures(&report);
    assert!(report.ok(), "{failed:#?}");
}

#[test]
fn check_packet_maps_failing_hidden_tests_to_the_ids_they_prove() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = check_demo_copy(tmp.path());
    // The fixture's own table is replaced by each case's.
    let toml = fs::read_to_string(root.join("packet.toml")).expect("packet.toml");
    let toml = toml.split("\n[proves.hidden]").next().expect("the manifest").to_string();
    let with = |table: &str| {
        fs::write(root.join("packet.toml"), format!("{toml}\n{table}\n"))
            .expect("writing packet.toml")
    };
    let proof_item = |report: &grader::check::CheckReport| {
        report
            .items
            .iter()
            .find(|i| i.name == "variant buggy's failing hidden tests prove only its ids")
            .map(|i| (i.ok, i.detail.clone()))
    };

    let names_tests = |report: &grader::check::CheckReport| {
        report
            .items
            .iter()
            .find(|i| i.name == "[proves.hidden] names tests the step runs")
            .map(|i| (i.ok, i.detail.clone()))
            .expect("the pattern item")
    };

    // Right: both failing tests prove hidden-fails, which buggy declares.
    with("[proves.hidden]\n\"test_add_*\" = \"hidden-fails\"");
    let report = check_packet(grader(), &root);
    assert!(report.ok(), "{:#?}", report.failures().collect::<Vec<_>>());
    assert_eq!(proof_item(&report).map(|p| p.0), Some(true));
    assert!(names_tests(&report).0, "{:?}", names_tests(&report));
    assert!(!report.warnings().any(|w| w.name == "every hidden-test step has a [proves] table"));

    // Wrong: a failing test proves an id the variant does not declare.
    with(
        "[proves.hidden]\n\"test_add_small\" = \"hidden-fails\"\n\"test_add_negative\" = \"notes-missing\"",
    );
    let report = check_packet(grader(), &root);
    let (ok, detail) = proof_item(&report).expect("the proof item");
    assert!(!ok);
    assert!(detail.contains("test_hidden::test_add_negative (step hidden) fails, proving notes-missing, which the variant does not declare"), "{detail}");
    assert!(!detail.contains("test_add_small"), "{detail}");

    // Unmapped: a failing test no pattern names (the other pattern names a
    // test the step never ran: a typo, which fails the self-test too).
    with(
        "[proves.hidden]\n\"test_add_small\" = \"hidden-fails\"\n\"test_add_negativ\" = \"hidden-fails\"",
    );
    let report = check_packet(grader(), &root);
    let (ok, detail) = proof_item(&report).expect("the proof item");
    assert!(!ok);
    assert!(detail.contains("test_hidden::test_add_negative (step hidden) fails and [proves.hidden] names no failure it proves"), "{detail}");
    let (ok, detail) = names_tests(&report);
    assert!(!ok);
    assert!(
        detail.contains("pattern \"test_add_negativ\" names no test the sample's grading of step hidden reported"),
        "{detail}"
    );
    // A variant that fails no hidden test has nothing to prove.
    assert!(report.items.iter().any(|i| i.name == "variant no-notes's failing hidden tests prove only its ids" && i.ok));
}

/// A twin of a parametrized test keeps its first, middle and last rows (a
/// literal `ids` list alike): one row contradicts the test as well as all
/// of them. Rows whose `ids` are not a literal list stay whole.
#[test]
fn twins_of_parametrized_tests_keep_three_rows() {
    let dir = tempfile::tempdir().unwrap();
    let module = r#"import pytest


@pytest.mark.parametrize("a, expected", [(1, 2), (2, 3), (3, 4), (4, 5), (5, 6)], ids=["one", "two", "three", "four", "five"])
def test_inc(a, expected):
    assert a + 1 == expected


@pytest.mark.parametrize("a", [1, 2, 3])
def test_few(a):
    assert a > 0


@pytest.mark.parametrize("a", [1, 2, 3, 4], ids=str)
def test_ids_fn(a):
    assert a < 10
"#;
    fs::write(dir.path().join("test_p.py"), module).unwrap();
    let generator = Path::new(env!("CARGO_MANIFEST_DIR")).join("harness/gatehouse_twins.py");
    let out = std::process::Command::new("python3")
        .arg("-I")
        .arg(&generator)
        .args(["out.json", "test_p.py"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.path().join("out.json")).unwrap()).unwrap();
    let mut twins: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for part in json["test_p.py"]["parts"].as_array().unwrap() {
        if let Some(name) = part["name"].as_str() {
            let codes = part["twins"].as_array().unwrap().iter();
            let decorators =
                codes.map(|t| t["code"].as_str().unwrap().lines().next().unwrap().to_string());
            twins.insert(name.to_string(), decorators.collect());
        }
    }
    let inc = &twins["test_inc"];
    assert_eq!(inc.len(), 2, "{inc:?}");
    assert!(inc[0].contains("[(1, 3), (3, 5), (5, 7)], ids=['one', 'three', 'five']"), "{inc:?}");
    assert!(inc[1].contains("[(1, 2), (3, 4), (5, 6)], ids=['one', 'three', 'five']"), "{inc:?}");
    assert!(twins["test_few"][0].contains("[1, 2, 3]"), "{twins:?}");
    assert!(twins["test_ids_fn"][0].contains("[1, 2, 3, 4], ids=str"), "{twins:?}");
}
