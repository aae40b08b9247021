//! The Gatehouse grader: packets, safe ingestion, a sandbox, checks, rubric
//! scoring and receipts. This crate knows nothing of the web, the database or
//! the UI.
//!
//! INVARIANTS.
//!
//! `grader` depends on no web, database or UI crate (no axum, sqlx, leptos,
//! tokio). It is a library with a blocking API; a server calls it from a
//! blocking thread.
//!
//! Submitted code and packet scripts run only through `sandbox::Sandbox::run`.
//! Nothing in the grader executes, imports or `eval`s a submitted file in the
//! grader's own process, and detectors never follow a symbolic link out of the
//! workspace.
//!
//! The audit never imports or runs the code it mutates outside the sandbox.
//! `gatehouse_audit.py` only parses (`ast`) and resolves module names with
//! `importlib.util.find_spec` on top-level names, which imports nothing;
//! applying a mutant is done on the parser's line spans, never by text search;
//! every mutant runs only through `run::run_on_copy` with the step's limits. A
//! mutant is classified from the trusted runner's stream, never from files in
//! the workspace.
//!
//! `Err(SandboxError)` means the machinery failed (a syscall, a mount, a cgroup
//! write) and names the call and its arguments. Anything the command itself
//! does, including crashing, timing out or hitting a limit, is an
//! `Ok(RunReport)`. `GradeError` keeps the same split: `Refused` (the
//! submission, exit 2), `Sandbox`/`Packet`/`Io` (the grader, exit 1).
//!
//! Nothing the scoring reads comes only from a channel the candidate's code can
//! write. Per-test results of a trusted command come from the runner's stream,
//! which the sandbox reads from outside; files in the workspace (JUnit, kept
//! logs) are cross-checked against it or are claimed evidence; a disagreement
//! is `evidence-tampering`, never a pass. Every read and write of packet or
//! workspace files (the packet loader's variants, mutants, lays, seed files and
//! brief; workspace assembly for grading and witnessed runs; mutant and
//! kept-file copies; detector reads) goes through a `root::Root` handle, so no
//! path a packet or submission names leaves its folder or follows a link. Files
//! packet code writes while the candidate's code runs (its child, same uid) are
//! kept only from `/evidence`, which the harness's Landlock-confined candidate
//! processes cannot write (`manifest` refuses any other `.gatehouse/` keep
//! pattern); a kernel without Landlock is a listed sandbox fallback, and each
//! file then kept from `/evidence` (or a step's JUnit there) is listed in the
//! receipt's `untrusted_evidence` (the scorecard shows both).
//! `Grader::assume_landlock_abi` makes a grader report a given ABI, so the
//! no-Landlock path is tested on a kernel that has it.
//!
//! What the scoring reads does not rest on the candidate's code leaving the
//! test process alone. Every trusted test run of the packet's tests carries
//! twins the code cannot tell from the real tests (random names for all, a salt
//! the candidate never sees); every run of the candidate's tests carries the
//! generic pair; the runner's audit hook and its framework record are installed
//! before any workspace file can be imported; the grader's files it laid
//! (helpers, collected hidden tests) are read-only; bytecode never reaches a
//! run. A defence that is a pattern over source text (`tamper`) is a hint
//! beside these, never the only one.
//!
//! The receipt is deterministic. Anything that varies between runs (wall and
//! CPU time, peak memory, output byte counts) goes in `timings`; output tails
//! are normalized (`run::normalize_output`). The calibration is an input like
//! the submission: the wall limits derived from it appear in the receipt's
//! runs, so two gradings agree when they share it (the recorded one of a
//! published version, or one grader's own). Canary names and choices come from
//! the calibration's salt and the submission's digest, and never reach the
//! receipt: output tails get the real names back, twins shown as
//! `name[canary]`, and the receipt records only how many canaries each run
//! carried.
//!
//! WHERE A LANGUAGE PLUGS IN. A language other than Python is one module,
//! `grader/src/lang_<name>.rs` (`lang_go.rs`, `lang_node.rs`), and the harness
//! files it embeds (`grader/harness/gatehouse_go_runner.py`;
//! `gatehouse_node_runner.js` and `gatehouse_node_child.js`). The shared code
//! names it in one place each: its toolchains in `env::TOOLCHAINS` (the
//! `[environment]` key, the command that prints the version in the sandbox,
//! what installs it: the probe asks every one once per grader, the pin file and
//! the receipt name them, and `packet check` refuses a packet whose pinned
//! toolchain is missing with `env::missing_toolchains`) and the matching field
//! of `manifest::Environment` (`toolchains`); a `trusted::RunnerKind` variant
//! that `trusted::command::plain` recognises (`go test ARGS`; `node --test
//! PATH...`, `npm test`) and `Plan::command` spells; the canaries
//! `run::run_guarded` plants for that runner (`lang_go::plant_canaries`, the
//! Node arm, and the twins through `run::plant_twins`, shared by every
//! language); its test files' twins: a `canary::Lang` variant (file names,
//! planted test names), a generator in `harness/` that writes the shared
//! `canary::Template` format with the language's own parser (`guard::generator`
//! spells its command) and the rule of which laid files its runner runs
//! (`lang_go::collects`, `lang_node::collects`, from `canary::hidden_modules`);
//! and which of its steps run only the packet's tests
//! (`grade::pipeline::fixed_tests`). Each runner speaks the Python runner's
//! channel records (`start`, `case`, `collect-error`, `audit`, `end`), so
//! `RunnerResult`, the cross-checks, the canary verdicts, detectors and scoring
//! need no language code. `scripts/setup` installs the toolchain.

pub mod audit;
pub mod bytecode;
pub mod canary;
pub mod check;
pub mod clock;
pub mod detect;
pub mod diff;
pub mod env;
pub mod evidence;
pub mod grade;
pub mod guard;
pub mod hidden_text;
pub mod ingest;
pub mod lang;
pub mod lint;
pub mod manifest;
pub mod packet;
pub mod par;
pub mod pattern;
pub mod pytest;
pub mod root;
pub mod run;
pub mod runtime;
pub mod sandbox;
pub mod score;
pub mod starter;
pub mod tamper;
pub mod tree;
pub mod trusted;
pub mod witness;
pub mod witness_run;
pub mod workdir;
