//! Go: where the language plugs into the grader.
//!
//! A packet pins the toolchain (`[environment] go = "1.19"`, a version
//! prefix of `go version` in the sandbox, probed with the interpreter);
//! `packet check` refuses a packet whose pinned toolchain the sandbox lacks
//! (`env::missing_toolchains`). The sandbox sees the host's `/usr` read-only,
//! so the toolchain and the prebuilt standard library are never the
//! workspace's.
//!
//! A command of the plain form `go test ARGS` runs through the trusted Go
//! runner (`harness/gatehouse_go_runner.py`, mounted read-only at
//! `/gatehouse`): a Python process the test binary cannot reach owns the
//! result channel (fd 3, nonce), sets every Go variable itself (GOROOT of
//! the host, GOFLAGS=-mod=mod so no `vendor/`, GOWORK=off, GOPROXY=off,
//! GOCACHE and GOPATH in the run's own `/tmp`), refuses cgo and `.syso`
//! objects in the graded packages, reports files left out by build
//! constraints, a `TestMain`, a `go.work` or a `vendor/` for the reviewer,
//! and turns the go command's test2json stream into one record per
//! top-level test (`<import path>::<TestName>`).
//!
//! The candidate's code is compiled into the test binary, so what it
//! prints is not trusted alone: every package a run tests (the root one,
//! and each below it for `./...`, each its own test process) carries the
//! generic canary pair ([`plant_canaries`]), two tests under
//! random names that touch no candidate code, one that must pass and one
//! that must fail. An `init()` or `TestMain` that exits 0 leaves them
//! unreported (or exits 0 beside a failed test); faked `--- PASS` or
//! test2json lines pass the test that must fail or report a test twice
//! (`trusted::RunnerResult::cross_check`). Each is `evidence-tampering`.
//! The packet's `_test.go` files a run compiles with every test running
//! ([`collects`]) also carry twins (`canary`, generated over `go/ast` by
//! `harness/gatehouse_go_twins.go`): a forgery active only while the
//! candidate's code runs, or an answer read from the test's source, passes
//! a twin beside its test.
//! A candidate `_test.go` that redefines a helper the hidden tests use does
//! not compile: the run fails, it never passes.
//! A test binary that crashes (a panic, in a `t.Run` subtest or a goroutine
//! too; a deadlock; `-test.timeout`; an `os.Exit` mid-test; a build
//! failure) is failing work, never tampering: the runner sends one `crash`
//! record per package and every test it did not report fails, naming the
//! crash (`trusted::ending`).

use std::path::Path;

pub mod cache;

/// The runner itself.
pub const RUNNER: &str = include_str!("../../harness/gatehouse_go_runner.py");
/// Its file name in the tool folder.
pub const RUNNER_FILE: &str = "gatehouse_go_runner.py";
/// The canary generator for Go test files (`canary::Lang`), run with `go
/// run` in GOPATH mode.
pub const TWINS: &str = include_str!("../../harness/gatehouse_go_twins.go");
/// Its file name in the tool folder.
pub const TWINS_FILE: &str = "gatehouse_go_twins.go";
/// The judge apart's files (`judge`): the stub and server generator, the
/// wire both sides compile, and the judge's side of it.
pub const APART_TOOLS: [(&str, &str); 3] = [
    ("gatehouse_go_apart.go", include_str!("../../harness/gatehouse_go_apart.go")),
    ("gatehouse_go_wire.go", include_str!("../../harness/gatehouse_go_wire.go")),
    ("gatehouse_go_wire_judge.go", include_str!("../../harness/gatehouse_go_wire_judge.go")),
];
/// The step variable naming the folder (under `.gatehouse/`) of the
/// packet's `_test.go` files: the runner sets the candidate's aside, and
/// the step's test ids are recorded at self-test like a pytest step's.
pub const ONLY_PACKET_TESTS: &str = "GATEHOUSE_GO_TESTS";

/// The command that starts the runner from the tool folder mounted at
/// `tools_mount` (its arguments follow).
pub fn runner_command(tools_mount: &str) -> String {
    format!("python3 -I -B {tools_mount}/{RUNNER_FILE}")
}

/// The `-run` pattern of `args` when it is a plain name (letters, digits,
/// `_`): the canaries' names contain it so the run selects them too.
fn run_filter(args: &[String]) -> Result<Option<String>, ()> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let value = match a.as_str() {
            "-run" | "--run" => it.next().cloned(),
            _ => match a.strip_prefix("-run=").or_else(|| a.strip_prefix("--run=")) {
                Some(v) => Some(v.to_string()),
                None => continue,
            },
        };
        return match value {
            Some(v)
                if !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                Ok(Some(v))
            }
            _ => Err(()),
        };
    }
    Ok(None)
}

/// Whether the run's options leave the canaries to run: no `-failfast`,
/// `-list`, `-skip`, `-shuffle` or `-count=0`, and a `-run` that is a plain
/// name, and only the root package (or `./...`).
fn allows_canaries(args: &[String]) -> bool {
    let packages: Vec<&String> = {
        let mut out = Vec::new();
        let mut skip = false;
        for a in args {
            if skip {
                skip = false;
                continue;
            }
            if a.starts_with('-') {
                skip = !a.contains('=')
                    && matches!(
                        a.trim_start_matches('-'),
                        "run" | "count" | "timeout" | "parallel" | "p" | "cpu" | "tags"
                    );
                continue;
            }
            out.push(a);
        }
        out
    };
    let blocked = args.iter().any(|a| {
        let name = a.split('=').next().unwrap_or(a).trim_start_matches('-');
        matches!(name, "failfast" | "list" | "skip" | "shuffle" | "bench") || a == "-count=0"
    });
    !blocked
        && run_filter(args).is_ok()
        && packages.iter().all(|p| p.as_str() == "." || p.as_str() == "./...")
}

/// Whether a run of `go test ARGS` compiles the test file laid at `laid`
/// (a workspace path) and runs every test in it, so that it can carry
/// twins (`canary::hidden_modules`): options that leave the canaries to
/// run and no `-run` filter, and the file is one the runner puts in the
/// root package: in the step's `GATEHOUSE_GO_TESTS` folder (`go_tests`),
/// whose files the runner copies in, else in the root folder.
pub fn collects(args: &[String], go_tests: Option<&str>, laid: &str) -> bool {
    if !allows_canaries(args) || !matches!(run_filter(args), Ok(None)) {
        return false;
    }
    let folder = laid.rsplit_once('/').map_or("", |(d, _)| d);
    match go_tests {
        Some(dir) => folder == dir.trim_start_matches("./").trim_end_matches('/'),
        None => folder.is_empty(),
    }
}

/// The package clause of the package in folder `dir`: the first `package
/// NAME` of a non-test `.go` file there.
fn package_clause(dir: &Path) -> Option<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".go") && !n.ends_with("_test.go"))
        .collect();
    names.sort();
    for n in names {
        let text = std::fs::read_to_string(dir.join(&n)).ok()?;
        for line in text.lines() {
            if let Some(rest) = line.trim().strip_prefix("package ") {
                let name = rest.split_whitespace().next().unwrap_or("");
                if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    return Some(name.to_string());
                }
            }
        }
    }
    None
}

/// The packages a run tests, as (workspace-relative folder, package
/// clause): the root package, and with `./...` every package below it the
/// go command walks into (not `vendor`, `testdata`, a folder whose name
/// starts with `.` or `_`, a nested module, or a link). Each is its own
/// test process, so each gets its own canaries.
fn tested_packages(ws: &Path, args: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let all = args.iter().any(|a| a == "./...");
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        let dir = if rel.is_empty() { ws.to_path_buf() } else { ws.join(&rel) };
        if let Some(name) = package_clause(&dir) {
            out.push((rel.clone(), name));
        }
        if !all {
            break;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut subs: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| {
                !n.starts_with('.') && !n.starts_with('_') && n != "vendor" && n != "testdata"
            })
            .filter(|n| std::fs::symlink_metadata(dir.join(n).join("go.mod")).is_err())
            .collect();
        subs.sort();
        for n in subs.into_iter().rev() {
            stack.push(if rel.is_empty() { n } else { format!("{rel}/{n}") });
        }
    }
    out
}

/// The generic canary pair planted in a run (`plant_canaries`): the test
/// file's workspace path, the test that must pass and the one that must
/// fail.
pub struct Planted {
    pub file: String,
    pub must_pass: String,
    pub must_fail: String,
}

/// Plants the generic canary pair as a test file of every package the run
/// tests (the root package, and each package below it for `./...`), under
/// random names (containing the run's `-run` name when it has one), from
/// `test_name` (a fresh random `test_...` name) and `below` (a random
/// number under its argument). Empty when the run's options or the
/// workspace leave no place for them (then the run carries no canary).
pub fn plant_canaries(
    ws: &Path,
    args: &[String],
    test_name: &mut dyn FnMut() -> String,
    below: &mut dyn FnMut(usize) -> usize,
) -> std::io::Result<Vec<Planted>> {
    if !allows_canaries(args) {
        return Ok(Vec::new());
    }
    let filter = run_filter(args).ok().flatten().unwrap_or_default();
    let root = crate::root::Root::open(ws)?;
    let mut out = Vec::new();
    for (dir, package) in tested_packages(ws, args) {
        let mut name = || format!("Test{filter}_{}", &test_name()[5..]);
        let pass = name();
        let fail = name();
        let (a, b) = (below(900) + 10, below(900) + 10);
        let (c, d) = (below(90) + 3, below(90) + 3);
        let mut tests = [
            (pass.clone(), format!("{a} + {b}"), a + b),
            (fail.clone(), format!("{c} * {d}"), c * d + 1),
        ];
        if below(2) == 0 {
            tests.swap(0, 1);
        }
        let base = format!("{}_test.go", test_name());
        let file = if dir.is_empty() { base } else { format!("{dir}/{base}") };
        let mut text = format!("package {package}\n\nimport \"testing\"\n");
        for (test, expr, want) in &tests {
            text.push_str(&format!(
                "\nfunc {test}(t *testing.T) {{\n\tif got := {expr}; got != {want} {{\n\t\tt.Fatalf(\"got %d, want {want}\", got)\n\t}}\n}}\n"
            ));
        }
        root.write(&file, text.as_bytes())?;
        out.push(Planted { file, must_pass: pass, must_fail: fail });
    }
    Ok(out)
}

/// The mutation audit's parser helper (`audit::parser`): lists the
/// definitions of a file and writes the rule mutants, over this language's
/// own parser; written into the grader's tool folder.
pub const AUDIT_FILE: &str = "gatehouse_audit_go.go";
/// Its text.
pub const AUDIT: &str = include_str!("../../harness/gatehouse_audit_go.go");

/// `go test` flags the judge apart takes (the runner's `split_flags`):
/// each name and whether it takes a value.
const APART_FLAGS: [(&str, bool); 17] = [
    ("run", true),
    ("count", true),
    ("timeout", true),
    ("parallel", true),
    ("cpu", true),
    ("shuffle", true),
    ("bench", true),
    ("benchtime", true),
    ("list", true),
    ("failfast", false),
    ("short", false),
    ("benchmem", false),
    ("tags", true),
    ("race", false),
    ("trimpath", false),
    ("v", false),
    ("p", true),
];

/// Whether a run of `go test ARGS` can be judged apart: it tests the root
/// package alone (`.`, or no package) with flags the judge maps onto its
/// builds and its test binary.
fn apart_args(args: &[String]) -> bool {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let Some(flag) = a.strip_prefix('-') else {
            if a != "." && a != "./" {
                return false;
            }
            continue;
        };
        let flag = flag.strip_prefix('-').unwrap_or(flag);
        let (name, has_value) = match flag.split_once('=') {
            Some((n, _)) => (n, true),
            None => (flag, false),
        };
        match APART_FLAGS.iter().find(|(n, _)| *n == name) {
            Some((_, true)) if !has_value && it.next().is_none() => return false,
            Some(_) => {}
            None => return false,
        }
    }
    true
}

/// How a run of the packet's Go tests is judged apart (JUDGE.md): the
/// host is the same supervisor as Python's (`harness/gatehouse_host.py`,
/// under the candidate's uid), which starts the server the runner builds
/// from the candidate's package (`harness/gatehouse_go_apart.go`); the
/// judge is the runner and the test binary it builds from the hidden tests
/// and a stub of the package. None for a run the judge cannot take (other
/// packages than the root one, flags it does not map): that run keeps the
/// canaries and the runner's cross-checks, and the receipt says it was
/// shared.
pub fn judge(args: &[String]) -> Option<super::JudgeSetup> {
    apart_args(args)
        .then(|| super::JudgeSetup { extra_processes: HOST_TASKS, ..super::python::judge() })
}

/// Tasks the judge apart adds to a Go run: the host supervisor (an
/// interpreter and its threads) and a host server at a time, a Go runtime
/// with a thread per core, its system monitor and whatever blocks in a
/// system call.
const HOST_TASKS: u64 = 32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twins_go_where_every_test_of_the_file_runs() {
        let check = |command: &str, go_tests: Option<&str>, laid: &str, expect: bool| {
            let args: Vec<String> = command.split_whitespace().map(String::from).collect();
            assert_eq!(collects(&args, go_tests, laid), expect, "{command:?} {go_tests:?} {laid}");
        };
        // The packet's folder of tests, copied into the root package.
        check("-count=1 .", Some(".gatehouse/go"), ".gatehouse/go/hidden_test.go", true);
        check("-count=1 .", Some("./.gatehouse/go/"), ".gatehouse/go/hidden_test.go", true);
        // A file beside them the runner sets aside, or elsewhere.
        check("-count=1 .", Some(".gatehouse/go"), "hidden_test.go", false);
        check("-count=1 .", Some(".gatehouse/go"), ".gatehouse/other/hidden_test.go", false);
        // Without the folder: test files of the root package only.
        check("-count=1 .", None, "hidden_test.go", true);
        check("-count=1 ./...", None, "sub/hidden_test.go", false);
        // Options that do not run every test.
        check("-run TestX .", None, "hidden_test.go", false);
        check("-failfast .", None, "hidden_test.go", false);
        check("-count=1 ./sub", None, "hidden_test.go", false);
    }

    #[test]
    fn judged_apart_only_the_root_package_with_flags_it_maps() {
        let args = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        for (command, apart) in [
            ("", true),
            (".", true),
            ("-count=1 .", true),
            ("-count 1 -run Hidden -v .", true),
            ("-race -tags=x .", true),
            ("-count=1 ./...", false),
            ("./sub", false),
            ("-json .", false),
            ("-exec x .", false),
            ("-run", false),
        ] {
            assert_eq!(judge(&args(command)).is_some(), apart, "{command:?}");
        }
    }

    #[test]
    fn canaries_only_where_every_test_runs() {
        let args = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        for (command, allowed) in [
            ("", true),
            (".", true),
            ("-count=1 ./...", true),
            ("-run Hidden .", true),
            ("-run=Hidden .", true),
            ("-run ^TestX$ .", false),
            ("-failfast .", false),
            ("-list . .", false),
            ("./sub", false),
        ] {
            assert_eq!(allows_canaries(&args(command)), allowed, "{command:?}");
        }
    }

    #[test]
    fn every_package_the_run_tests_gets_its_own_canaries() {
        let ws = tempfile::tempdir().unwrap();
        let put = |path: &str, text: &str| {
            let p = ws.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        put("go.mod", "module ticket\n");
        put("client.go", "package ticket\n");
        put("sub/b.go", "// a comment\npackage sub\n");
        put("sub/deeper/c.go", "package deeper\n");
        // Folders and files `./...` does not reach, or that are no package.
        for path in ["sub/testdata/d.go", "vendor/x/e.go", ".hidden/f.go", "_skip/g.go"] {
            put(path, "package skipped\n");
        }
        put("nested/go.mod", "module nested\n");
        put("nested/h.go", "package nested\n");
        put("onlytests/i_test.go", "package onlytests\n");
        let plant = |args: &[&str]| -> Vec<(String, String)> {
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            let mut n = 0;
            let planted = plant_canaries(
                ws.path(),
                &args,
                &mut || {
                    n += 1;
                    format!("test_{n:03}")
                },
                &mut |_| 0,
            )
            .unwrap();
            planted
                .into_iter()
                .map(|p| {
                    let text = std::fs::read_to_string(ws.path().join(&p.file)).unwrap();
                    std::fs::remove_file(ws.path().join(&p.file)).unwrap();
                    assert!(text.contains(&p.must_pass) && text.contains(&p.must_fail));
                    (p.file, text.lines().next().unwrap().to_string())
                })
                .collect()
        };
        assert_eq!(
            plant(&["-count=1", "./..."]),
            [
                ("test_003_test.go".to_string(), "package ticket".to_string()),
                ("sub/test_006_test.go".into(), "package sub".into()),
                ("sub/deeper/test_009_test.go".into(), "package deeper".into()),
            ]
        );
        assert_eq!(plant(&["."]), [("test_003_test.go".to_string(), "package ticket".to_string())]);
        assert!(plant(&["-failfast", "./..."]).is_empty());
    }

    #[test]
    fn a_pinned_toolchain_must_be_there() {
        let mut m: crate::manifest::Manifest =
            toml::from_str("[packet]\nslug = \"x\"\nversion = \"1\"\ntitle = \"x\"\nsummary = \"x\"\n[commands]\ntest = \"go test .\"\n")
                .unwrap();
        let mut probe = crate::env::EnvProbe {
            python: None,
            tools: [("go".to_string(), Some("1.19.8".to_string()))].into(),
            stdlib: Default::default(),
            runner_modules: Default::default(),
        };
        let missing = |m: &crate::manifest::Manifest, p: &crate::env::EnvProbe| {
            crate::env::missing_toolchains(m, p)
        };
        assert!(missing(&m, &probe).is_empty(), "no pin: nothing required");
        m.environment.go = Some("1.19".into());
        assert!(missing(&m, &probe).is_empty());
        probe.tools.insert("go".into(), Some("1.21.0".into()));
        let e = missing(&m, &probe).join("\n");
        assert!(e.contains("go 1.21.0") && e.contains("go = \"1.19\""), "{e}");
        probe.tools.insert("go".into(), None);
        let e = missing(&m, &probe).join("\n");
        assert!(e.contains("has none") && e.contains("golang-go"), "{e}");
    }
}
