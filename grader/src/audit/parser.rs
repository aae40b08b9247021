//! The language of an audit's target, and the parser that reads it: each
//! language's own, never a text search.
//!
//! - **Python**: `harness/gatehouse_audit.py` over `ast`, on the host under
//!   [`super::helper::HelperLimits`] ([`Helper`]).
//! - **TypeScript**: `harness/gatehouse_audit_ts.js` over the grader's
//!   pinned TypeScript compiler (its parser and its type checker, from
//!   `lang::node::TS_HOME`), in the grading sandbox.
//! - **Go**: `harness/gatehouse_audit_go.go` over `go/parser`, `go/ast` and
//!   `go/types` (the standard library's export data), run with `go run` in
//!   GOPATH mode in the grading sandbox, as the Go canary generator is.
//!
//! The sandboxed helpers read one JSON request from the workspace
//! (`.gatehouse/request.json`) and write one answer
//! (`.gatehouse/answer.json`); each call is one sandbox run with
//! [`HELPER_LIMITS`], on a fresh copy of an empty folder. A batch of
//! proposals is applied in one call (a Go helper is compiled once per call,
//! and a TypeScript program is type-checked once for the sample). They
//! answer with the mutated file; the diff is [`super::deliver::unified`]'s.
//!
//! Every helper validates a mutant the same way: it parses as one
//! definition of the same kind and name, keeps its signature, differs from
//! the sample after normalisation, and the mutated file still compiles
//! (Python: parses and imports only modules that exist; TypeScript and Go:
//! type-checks with no error the sample lacks). Rule mutants of TypeScript
//! and Go are validated as they are made: only valid ones are proposed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::Proposal;
use super::helper::{Applied, Def, Helper};
use crate::sandbox::{Limits, Sandbox};

/// The tool file of the Go helper.
pub use crate::lang::go::{AUDIT as GO_HELPER, AUDIT_FILE as GO_HELPER_FILE};
/// The tool file of the TypeScript helper.
pub use crate::lang::node::{AUDIT as TS_HELPER, AUDIT_FILE as TS_HELPER_FILE};

/// The limits of one sandboxed helper call.
pub const HELPER_LIMITS: Limits = Limits {
    wall: Duration::from_secs(180),
    cpu_secs: 180,
    memory_bytes: 1 << 30,
    processes: 64,
    file_size_bytes: 64 << 20,
    open_files: 256,
    disk_bytes: 512 << 20,
    output_tail_bytes: 16 * 1024,
};

/// Bytes of a sandboxed helper's answer read; more is an error.
const ANSWER_CAP: u64 = 64 << 20;
/// Files and bytes of context (the package's other files) sent along.
const CONTEXT_FILES: usize = 200;
const CONTEXT_BYTES: usize = 4 << 20;

/// The language of a file the audit mutates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    Python,
    TypeScript,
    Go,
}

impl Language {
    /// The language of a target file, by its name (a test file is none).
    pub fn of(path: &str) -> Option<Language> {
        let name = path.rsplit('/').next().unwrap_or(path);
        if name.ends_with(".py") {
            Some(Language::Python)
        } else if name.ends_with(".ts") && !name.ends_with(".d.ts") {
            Some(Language::TypeScript)
        } else if name.ends_with(".go") && !name.ends_with("_test.go") {
            Some(Language::Go)
        } else {
            None
        }
    }

    /// The language of a packet: Go or TypeScript when its environment
    /// pins that toolchain, else Python.
    pub fn of_packet(packet: &crate::packet::Packet) -> Language {
        let env = &packet.manifest.environment;
        if env.go.is_some() {
            Language::Go
        } else if env.typescript.is_some() || env.node.is_some() {
            Language::TypeScript
        } else {
            Language::Python
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Language::Python => "Python",
            Language::TypeScript => "TypeScript",
            Language::Go => "Go",
        }
    }

    /// Whether `path` (in the sample) is a source file of this language
    /// that is not a test, a fixture or a type declaration.
    pub fn is_own_source(self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').collect();
        let name = parts.last().copied().unwrap_or_default();
        let dirs = &parts[..parts.len() - 1];
        if dirs.iter().any(|d| {
            matches!(*d, "tests" | "test" | "fixtures" | "testdata" | "node_modules" | "vendor")
                || d.starts_with('.')
        }) {
            return false;
        }
        match self {
            Language::Python => {
                name.ends_with(".py")
                    && !name.starts_with("test_")
                    && !name.ends_with("_test.py")
                    && name != "conftest.py"
            }
            Language::TypeScript => {
                Language::of(path) == Some(self) && !crate::lang::node::is_test_file(path)
            }
            Language::Go => Language::of(path) == Some(self),
        }
    }

    /// The audit's canary: `source`, the target at `target`, made to fail
    /// as it loads (an import error, a throw at the top, a panicking
    /// `init`), which the hidden steps must notice.
    pub fn canary(self, target: &str, source: &str) -> String {
        let why = format!("gatehouse audit canary: {target} cannot be imported");
        match self {
            Language::Python => format!("raise ImportError({why:?})\n{source}"),
            Language::TypeScript => format!("throw new Error({why:?});\n{source}"),
            Language::Go => {
                let sep = if source.ends_with('\n') { "" } else { "\n" };
                format!("{source}{sep}\nfunc init() {{ panic({why:?}) }}\n")
            }
        }
    }
}

/// What the parser needs besides the target: the workspace's other
/// modules (Python: names that import) and files (TypeScript: the other
/// `.ts` files; Go: the package's other non-test files), so the mutated
/// file is checked as it would compile in place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    pub local_modules: Vec<String>,
    pub files: BTreeMap<String, String>,
}

impl Context {
    /// The context of `target` (language `lang`) in `tree`, the sample laid
    /// over the starter: at most [`CONTEXT_FILES`] files and
    /// [`CONTEXT_BYTES`] bytes, links never followed.
    pub fn of(lang: Language, tree: &std::path::Path, target: &str) -> Context {
        let mut files = BTreeMap::new();
        if lang == Language::Python {
            return Context::default();
        }
        let Ok(root) = crate::root::Root::open(tree) else { return Context::default() };
        let folder = |p: &str| p.rsplit_once('/').map_or("", |(d, _)| d).to_string();
        let mut bytes = 0;
        for rel in root.files("").unwrap_or_default() {
            let wanted = rel != target
                && lang.is_own_source(&rel)
                && (lang != Language::Go || folder(&rel) == folder(target));
            if !wanted || files.len() >= CONTEXT_FILES {
                continue;
            }
            let Ok(text) = root.read_to_string(&rel) else { continue };
            if bytes + text.len() > CONTEXT_BYTES {
                continue;
            }
            bytes += text.len();
            files.insert(rel, text);
        }
        Context { local_modules: Vec::new(), files }
    }
}

/// The parser of one language.
pub struct Parser<'a> {
    lang: Language,
    kind: Kind<'a>,
}

enum Kind<'a> {
    Python(Helper),
    Sandboxed { sandbox: &'a Sandbox, work: crate::workdir::WorkDir, calls: AtomicUsize },
}

impl<'a> Parser<'a> {
    /// The parser of `lang`; TypeScript and Go run in `sandbox`, which must
    /// mount the grader's tool folder.
    pub fn new(lang: Language, sandbox: &'a Sandbox) -> Result<Parser<'a>, String> {
        let kind = match lang {
            Language::Python => Kind::Python(Helper::new()?),
            Language::TypeScript | Language::Go => {
                if sandbox.config().tool_dir.is_none() {
                    return Err(format!(
                        "auditing a {} target needs the grader's tool folder in the sandbox (Grader::for_host)",
                        lang.name()
                    ));
                }
                let work = crate::workdir::WorkDir::new("gatehouse-audit-parse-")
                    .map_err(|e| format!("creating the audit helper's folder: {e}"))?;
                std::fs::create_dir_all(work.path().join("empty"))
                    .map_err(|e| format!("creating the audit helper's folder: {e}"))?;
                Kind::Sandboxed { sandbox, work, calls: AtomicUsize::new(0) }
            }
        };
        Ok(Parser { lang, kind })
    }

    pub fn language(&self) -> Language {
        self.lang
    }

    /// The command line of a sandboxed helper call.
    fn command(&self, command: &str) -> String {
        let tools = crate::sandbox::TOOL_MOUNT;
        let io = ".gatehouse/request.json .gatehouse/answer.json";
        match self.lang {
            Language::TypeScript => format!(
                "node {tools}/{TS_HELPER_FILE} {}/node_modules/typescript {command} {io}",
                crate::lang::node::TS_HOME
            ),
            // GOPATH mode (no go.mod is read), its caches in the run's /tmp.
            _ => format!(
                "GO111MODULE=off GOPATH=/tmp/gatehouse-audit GOCACHE=/tmp/gatehouse-audit/cache GOFLAGS= go run {tools}/{GO_HELPER_FILE} {command} {io}"
            ),
        }
    }

    /// One call of a sandboxed helper.
    fn call(&self, command: &str, request: &Value) -> Result<Value, String> {
        let Kind::Sandboxed { sandbox, work, calls } = &self.kind else {
            return Err("the Python helper is not sandboxed".into());
        };
        let n = calls.fetch_add(1, Ordering::Relaxed);
        let scratch: PathBuf = work.path().join(format!("call{n}"));
        let input = serde_json::to_vec(request).map_err(|e| e.to_string())?;
        let lang = self.lang.name();
        let ran = crate::run::run_on_copy(
            sandbox,
            &work.path().join("empty"),
            &scratch,
            |w| crate::root::Root::open(w)?.write(".gatehouse/request.json", &input),
            &self.command(command),
            &HELPER_LIMITS,
            Vec::new(),
        )
        .map_err(|e| format!("running the {lang} audit helper ({command}): {e}"));
        let answer = ran.and_then(|ran| {
            let path = scratch.join(".gatehouse/answer.json");
            let too_big = std::fs::symlink_metadata(&path).is_ok_and(|m| m.len() > ANSWER_CAP);
            if too_big {
                return Err(format!(
                    "the {lang} audit helper ({command}) answered more than {} MiB",
                    ANSWER_CAP >> 20
                ));
            }
            let r = &ran.report;
            let bytes = std::fs::read(&path).map_err(|_| {
                format!(
                    "the {lang} audit helper ({command}) gave no answer ({}): {}",
                    r.describe(),
                    r.stderr_tail.lines().last().unwrap_or("no output")
                )
            })?;
            serde_json::from_slice::<Value>(&bytes)
                .map_err(|e| format!("the {lang} audit helper ({command}) answered no JSON: {e}"))
        });
        let _ = std::fs::remove_dir_all(&scratch);
        let v = answer?;
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            return Err(e.to_string());
        }
        Ok(v)
    }

    /// The top-level definitions of `source` (the file at `path`).
    pub fn defs(&self, source: &str, path: &str) -> Result<Vec<Def>, String> {
        if let Kind::Python(h) = &self.kind {
            return h.defs(source);
        }
        let v = self.call("defs", &json!({ "source": source, "path": path }))?;
        serde_json::from_value(v["defs"].clone())
            .map_err(|e| format!("the audit helper's defs: {e}"))
    }

    /// The modules `source` imports: Python's dotted names, TypeScript's
    /// module specifiers, Go's import paths.
    pub fn imports(&self, source: &str) -> Result<Vec<String>, String> {
        if let Kind::Python(h) = &self.kind {
            return h.imports(source);
        }
        let v = self.call("imports", &json!({ "source": source, "path": "imports.ts" }))?;
        serde_json::from_value(v["modules"].clone())
            .map_err(|e| format!("the audit helper's imports: {e}"))
    }

    /// Rule mutants of the named definitions (all when empty), at most
    /// `per_function` of each (0: all), evenly spread.
    pub fn rules(
        &self,
        source: &str,
        path: &str,
        context: &Context,
        functions: &[String],
        per_function: usize,
    ) -> Result<Vec<Proposal>, String> {
        if let Kind::Python(h) = &self.kind {
            return h.rules(source, functions, per_function);
        }
        let v = self.call(
            "rules",
            &json!({ "source": source, "path": path, "context": context.files, "functions": functions, "per_function": per_function }),
        )?;
        serde_json::from_value(v["mutants"].clone())
            .map_err(|e| format!("the audit helper's rule mutants: {e}"))
    }

    /// Applies each proposal to `source` (the file at `path`): the mutated
    /// file and its diff, or why the proposal is invalid. `Err` is the
    /// machinery's.
    pub fn apply(
        &self,
        source: &str,
        path: &str,
        context: &Context,
        proposals: &[Proposal],
    ) -> Result<Vec<Result<Applied, String>>, String> {
        if let Kind::Python(h) = &self.kind {
            return crate::par::map_indexed(proposals.len(), |i| {
                h.apply(source, &proposals[i].code, path, &context.local_modules)
            })
            .into_iter()
            .collect();
        }
        if proposals.is_empty() {
            return Ok(Vec::new());
        }
        let list: Vec<Value> =
            proposals.iter().map(|p| json!({ "id": p.id, "code": p.code })).collect();
        let v = self.call(
            "apply",
            &json!({ "source": source, "path": path, "context": context.files, "proposals": list }),
        )?;
        let results = v["results"].as_array().ok_or("the audit helper answered no results")?;
        if results.len() != proposals.len() {
            return Err(format!(
                "the audit helper answered {} results for {} proposals",
                results.len(),
                proposals.len()
            ));
        }
        Ok(results
            .iter()
            .map(|r| {
                if r["ok"] == json!(true) {
                    let mutated = r["source"].as_str().unwrap_or_default().to_string();
                    Ok(Applied {
                        name: r["name"].as_str().unwrap_or_default().to_string(),
                        diff: super::deliver::unified(path, source, &mutated),
                        source: mutated,
                    })
                } else {
                    Err(r["reason"].as_str().unwrap_or("the helper gave no reason").to_string())
                }
            })
            .collect())
    }
}
