//! TypeScript on Node: where the language plugs into the grader.
//!
//! - **The toolchain.** Node.js is Debian's (`/usr/bin/node`); the
//!   TypeScript compiler and Node's type definitions are the grader's own,
//!   pinned by `grader/toolchain/node/package-lock.json` and installed by
//!   `scripts/setup` into [`TS_HOME`], under `/usr`, which every sandbox
//!   sees read-only. A packet pins both (`[environment] node = "20"`,
//!   `typescript = "5"`); the probe asks each for its version
//!   (`env::TOOLCHAINS`), and `packet check` refuses a packet whose pinned
//!   toolchain the sandbox lacks.
//! - **The trusted runner.** A packet command of the plain form `node
//!   --test PATH...` or `npm test` ([`plain`]) runs as [`command`]:
//!   `harness/gatehouse_node_runner.js` on the read-only tool mount. It
//!   never loads a workspace file: it takes the run's nonce from
//!   [`NONCE_FILE`] (written by the grader, removed by the runner before
//!   any candidate code runs, so it is in no environment), compiles the
//!   test files and what they import with the grader's compiler and
//!   options (the submission's `tsconfig.json`, `package.json`, `.npmrc`
//!   and `node_modules/` are never read), and runs the compiled tests in a
//!   child (`harness/gatehouse_node_child.js`, also node:test's reporter)
//!   with no `NODE_*` variable and an IPC channel on its descriptor 3. It
//!   streams the Python runner's record format over the grader's pipe and
//!   cross-checks the child (an exit 0 before the end, a test reported
//!   twice, an exit status other than reported, node:test or node:assert
//!   changed in memory: integrity records). Its exit status is computed
//!   from the cases, never taken from the child.
//! - **Judged apart** (JUDGE.md, [`judge`]). A run of the packet's tests
//!   only (`guard::fixed_tests`: every path the command names is laid by
//!   the packet) runs with a host: the runner compiles the packet's files
//!   into a folder only the judge's uid reads and the candidate's into
//!   another, and its test process installs the judge
//!   (`harness/gatehouse_node_judge.js`) before node:test or any test file
//!   loads: `require` of a candidate module gets a proxy module served by
//!   a host server (`harness/gatehouse_node_host.js --serve`, a child of
//!   the host supervisor [`HOST_ARGV`] that the sandbox starts under the
//!   candidate's uid), over framed, bounded JSON
//!   (`harness/gatehouse_node_wire.js`). Such a run plants no canary.
//! - **Canaries.** Every other Node run carries the generic pair
//!   ([`generic_module`]): a test that must pass and one that must fail,
//!   under fresh random names, in a TypeScript file beside the real tests;
//!   the packet's test files it runs ([`collects`]) carry twins (`canary`,
//!   generated with the TypeScript compiler's parser by
//!   `harness/gatehouse_ts_twins.js`) in a packet that opts out of the
//!   judge apart (`judge = "shared"`).

// A leaf: `trusted` and `run` call in here, so nothing here calls them.

/// The parent runner.
pub const RUNNER: &str = include_str!("../../harness/gatehouse_node_runner.js");
/// The test process (and node:test reporter) the runner starts.
pub const CHILD: &str = include_str!("../../harness/gatehouse_node_child.js");
/// The judge's side of a run judged apart, loaded by the test process.
pub const JUDGE: &str = include_str!("../../harness/gatehouse_node_judge.js");
/// The host supervisor and host server, under the candidate's uid.
pub const HOST: &str = include_str!("../../harness/gatehouse_node_host.js");
/// The wire between them (framing, the reader thread, the codec's data).
pub const WIRE: &str = include_str!("../../harness/gatehouse_node_wire.js");

/// Where `scripts/setup` installs the TypeScript toolchain.
pub const TS_HOME: &str = "/usr/local/lib/gatehouse/node";

/// Where the grader writes a run's nonce for the runner to take.
pub const NONCE_FILE: &str = ".gatehouse/nonce";

/// The canary generator for TypeScript test files (`canary::Lang`).
pub const TWINS: &str = include_str!("../../harness/gatehouse_ts_twins.js");

/// The tools written into the grader's tool folder.
pub const TOOLS: [(&str, &str); 6] = [
    ("gatehouse_node_runner.js", RUNNER),
    ("gatehouse_node_child.js", CHILD),
    ("gatehouse_node_judge.js", JUDGE),
    ("gatehouse_node_host.js", HOST),
    ("gatehouse_node_wire.js", WIRE),
    ("gatehouse_ts_twins.js", TWINS),
];

/// What the judge apart adds to a run's tasks: a Node process is seven
/// threads (four of V8's pool, libuv's, the inspector's, its main), and a
/// run judged apart adds the supervisor and a host server (with its reader
/// thread), and the judge's reader thread: the packet's `[limits]
/// processes` was set for the runner and its test process alone.
pub const HOST_TASKS: u64 = 24;

/// The host supervisor's command in a run judged apart: the grader's own
/// file on the read-only tool folder, the sandbox's `node`, with no
/// `NODE_*` variable to configure it.
pub const HOST_ARGV: [&str; 3] = [
    "/bin/sh",
    "-c",
    "exec env -u NODE_OPTIONS -u NODE_PATH node /gatehouse/gatehouse_node_host.js",
];

/// The runner's arguments when `words` is a plain Node test command:
/// `node --test PATH...` (paths only, no options) or `npm test` (`npm t`,
/// `npm run test`), which runs what `node --test` would find.
pub fn plain(words: &[&str]) -> Option<Vec<String>> {
    match words {
        ["node", "--test", rest @ ..] if rest.iter().all(|w| !w.starts_with('-')) => {
            Some(rest.iter().map(|s| s.to_string()).collect())
        }
        ["npm", "test" | "t"] | ["npm", "run", "test"] => Some(Vec::new()),
        _ => None,
    }
}

/// The shell text the sandbox runs for the runner with `args` (the
/// runner on the tool mount, `trusted::TOOLS_MOUNT`), each argument quoted
/// by `quote`.
pub fn command(args: &[String], quote: impl Fn(&str) -> String) -> String {
    let mut s =
        String::from("env -u NODE_OPTIONS -u NODE_PATH node /gatehouse/gatehouse_node_runner.js");
    for a in args {
        s.push(' ');
        s.push_str(&quote(a));
    }
    s
}

/// Whether a workspace path is a test file the runner finds when no path
/// is named (as `node --test` would, for TypeScript).
pub fn is_test_file(path: &str) -> bool {
    let Some(stem) = path.strip_suffix(".ts").filter(|_| !path.ends_with(".d.ts")) else {
        return false;
    };
    let base = stem.rsplit('/').next().unwrap_or(stem);
    let parts: Vec<&str> = path.split('/').collect();
    if parts.iter().any(|p| p.starts_with('.') || *p == "node_modules") {
        return false;
    }
    base.ends_with(".test")
        || base.ends_with("-test")
        || base.ends_with("_test")
        || base.starts_with("test-")
        || base == "test"
        || parts[..parts.len() - 1].contains(&"test")
}

/// Whether a run of the Node runner with `args` (its paths) runs the test
/// file laid at `laid` (a workspace path), so that it can carry twins
/// (`canary::hidden_modules`): a path it names, or with none, a test file
/// it finds.
pub fn collects(args: &[String], laid: &str) -> bool {
    if args.is_empty() {
        return is_test_file(laid);
    }
    args.iter().any(|a| a.trim_start_matches("./") == laid)
}

/// Whether `args` (the runner's paths) name test files that are all laid
/// by the packet: the run's tests are then the packet's alone.
pub fn fixed(args: &[String], laid: &[String]) -> bool {
    !args.is_empty() && args.iter().all(|a| laid.iter().any(|l| l == a.trim_start_matches("./")))
}

/// Where the generic pair is planted (not a dot folder; the runner is
/// told to run it first).
pub const CANARY_DIR: &str = "gatehouse_canary";

/// The generic pair as a TypeScript test file: `pass`, a test that must
/// pass, and `fail`, one that must fail, neither touching the candidate's
/// code; `below(n)` picks the numbers and the order (`canary::Rng`).
pub fn generic_module(below: &mut dyn FnMut(usize) -> usize, pass: &str, fail: &str) -> String {
    let (a, b, c, d) = (below(900) + 10, below(900) + 10, below(90) + 3, below(90) + 3);
    let (first, second) = if below(2) == 0 {
        (format!("{a} + {b}, {}", a + b), format!("{c} * {d}, {}", c * d + 1))
    } else {
        (format!("{c} * {d}, {}", c * d), format!("{a} + {b}, {}", a + b + 1))
    };
    let mut tests = [(pass, first), (fail, second)];
    if below(2) == 0 {
        tests.swap(0, 1);
    }
    // Both assertion styles the hidden tests may use, one per test.
    let mut s = String::from(
        "import { test } from \"node:test\";\nimport assert from \"node:assert\";\nimport strict from \"node:assert/strict\";\n",
    );
    for (i, (name, args)) in tests.iter().enumerate() {
        let call =
            if (i + below(2)).is_multiple_of(2) { "strict.equal" } else { "assert.strictEqual" };
        s.push_str(&format!("\ntest(\"{name}\", () => {{\n  {call}({args});\n}});\n"));
    }
    s
}

/// How a run of the packet's TypeScript on Node tests is judged apart
/// (JUDGE.md): the runner's test process is the judge
/// (`harness/gatehouse_node_judge.js`), the host supervisor
/// (`harness/gatehouse_node_host.js`) starts host servers that load the
/// candidate's compiled modules, and programs, under the candidate's uid.
pub fn judge() -> Option<super::JudgeSetup> {
    Some(super::JudgeSetup {
        host_argv: HOST_ARGV.iter().map(|s| s.to_string()).collect(),
        extra_processes: HOST_TASKS,
    })
}

/// The mutation audit's parser helper (`audit::parser`): lists the
/// definitions of a file and writes the rule mutants, over this language's
/// own parser; written into the grader's tool folder.
pub const AUDIT_FILE: &str = "gatehouse_audit_ts.js";
/// Its text.
pub const AUDIT: &str = include_str!("../../harness/gatehouse_audit_ts.js");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twins_go_in_the_test_files_the_run_runs() {
        let check = |paths: &[&str], laid: &str, expect: bool| {
            let args: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
            assert_eq!(collects(&args, laid), expect, "{paths:?} {laid}");
        };
        check(&[".gatehouse/hidden.test.ts"], ".gatehouse/hidden.test.ts", true);
        check(&["./.gatehouse/hidden.test.ts"], ".gatehouse/hidden.test.ts", true);
        check(&["test/bucket.test.ts"], ".gatehouse/hidden.test.ts", false);
        // No path: what the runner finds (never a dot folder).
        check(&[], "test/hidden.test.ts", true);
        check(&[], ".gatehouse/hidden.test.ts", false);
        check(&[], "src/bucket.ts", false);
    }

    #[test]
    fn plain_node_commands() {
        let check = |cmd: &str, expect: Option<&[&str]>| {
            let words: Vec<&str> = cmd.split_whitespace().collect();
            let got = plain(&words);
            assert_eq!(
                got.as_deref().map(|v| v.iter().map(String::as_str).collect::<Vec<_>>()),
                expect.map(|e| e.to_vec()),
                "{cmd}"
            );
        };
        check("node --test", Some(&[]));
        check("node --test test/hidden.test.ts", Some(&["test/hidden.test.ts"]));
        check("npm test", Some(&[]));
        check("npm run test", Some(&[]));
        // Options are not plain: the runner decides how tests run.
        check("node --test --test-reporter=x test", None);
        check("node --import ./x.js --test", None);
        check("node test/x.js", None);
        check("npm run build", None);
        assert_eq!(
            command(&["test/a b.test.ts".into()], |a| format!("'{a}'")),
            "env -u NODE_OPTIONS -u NODE_PATH node /gatehouse/gatehouse_node_runner.js 'test/a b.test.ts'"
        );
    }

    #[test]
    fn test_files_as_node_finds_them() {
        for (path, expect) in [
            ("test/bucket.test.ts", true),
            ("src/bucket.test.ts", true),
            ("test/helpers.ts", true),
            ("bucket_test.ts", true),
            ("src/bucket.ts", false),
            ("test/types.d.ts", false),
            ("node_modules/x/test/a.test.ts", false),
            (".gatehouse/a.test.ts", false),
            ("test/bucket.test.js", false),
        ] {
            assert_eq!(is_test_file(path), expect, "{path}");
        }
        let laid = vec!["test/hidden.test.ts".to_string()];
        assert!(fixed(&["test/hidden.test.ts".into()], &laid));
        assert!(fixed(&["./test/hidden.test.ts".into()], &laid));
        assert!(!fixed(&[], &laid));
        assert!(!fixed(&["test/bucket.test.ts".into()], &laid));
    }

    #[test]
    fn the_generic_pair_has_one_test_of_each_kind() {
        for seed in 0..8usize {
            let mut n = seed;
            let mut below = |k: usize| {
                n = n.wrapping_mul(31).wrapping_add(7);
                n % k
            };
            let text = generic_module(&mut below, "test_pass", "test_fail");
            // Each test asserts plain arithmetic: the passing one right,
            // the failing one off by one.
            for (name, right) in [("test_pass", true), ("test_fail", false)] {
                let at = text.find(&format!("test(\"{name}\"")).expect("planted");
                let call = &text[at..text[at..].find("});").unwrap() + at];
                let args = call.split_once('(').unwrap().1.split_once("=> {").unwrap().1;
                let inner = args.split_once('(').unwrap().1.split_once(')').unwrap().0;
                let (expr, value) = inner.rsplit_once(", ").unwrap();
                let eval = |e: &str| -> usize {
                    let (x, op, y) = if let Some((x, y)) = e.split_once(" + ") {
                        (x, '+', y)
                    } else {
                        let (x, y) = e.split_once(" * ").unwrap();
                        (x, '*', y)
                    };
                    let (x, y): (usize, usize) = (x.parse().unwrap(), y.parse().unwrap());
                    if op == '+' { x + y } else { x * y }
                };
                assert_eq!(eval(expr) == value.parse::<usize>().unwrap(), right, "{text}");
            }
        }
    }
}
