//! Only the source runs: submitted bytecode caches are set aside at
//! ingestion (`ingest::is_bytecode`), so no run can read one, and the
//! runner writes none and checks hash-based caches against their source
//! (`trusted::RUNNER_FLAGS`). What is left is to say when a submitted
//! `.pyc` was meant to run instead of its source: an unchecked hash-based
//! pyc (PEP 552, which the interpreter loads without looking at the `.py`)
//! whose header carries the source's hash and whose code is not the
//! source's (a forged header: compiling a source and editing it afterwards
//! leaves the old hash, and is only listed), or a `.pyc` with
//! no source where the interpreter would import it as a module. Those are
//! `evidence-tampering`: reviewers and every check read a clean source
//! while another program would run. Stale caches (another source's size or
//! hash) and other interpreters' caches are only listed.
//!
//! The comparison runs `harness/gatehouse_pyc.py` in the sandbox: the
//! bytecode is unmarshalled and the source compiled, nothing is imported.

use std::collections::BTreeMap;
use std::path::Path;

use crate::ingest::Ingested;
use crate::run::RunError;
use crate::sandbox::Sandbox;

/// The source a cached pyc was compiled from, and whether the interpreter
/// would import the pyc itself when that source is missing (a legacy
/// `name.pyc` beside where `name.py` would be; a `__pycache__` entry is
/// never imported without its source).
pub fn source_of(pyc: &str) -> (String, bool) {
    let (dir, name) = pyc.rsplit_once('/').map_or(("", pyc), |(d, n)| (d, n));
    let join = |d: &str, n: &str| if d.is_empty() { n.to_string() } else { format!("{d}/{n}") };
    if dir == "__pycache__" || dir.ends_with("/__pycache__") {
        let parent = dir.trim_end_matches("__pycache__").trim_end_matches('/');
        let module = name.split('.').next().unwrap_or(name);
        return (join(parent, &format!("{module}.py")), false);
    }
    let stem = name.strip_suffix(".pyc").or_else(|| name.strip_suffix(".pyo")).unwrap_or(name);
    (join(dir, &format!("{stem}.py")), true)
}

/// Signs of tampering among the bytecode `ingested` set aside (empty when
/// there is none or none would have run).
pub fn check(sandbox: &Sandbox, ingested: &Ingested) -> Result<Vec<String>, RunError> {
    let submitted: std::collections::BTreeSet<&str> =
        ingested.files.iter().map(|f| f.path.as_str()).collect();
    let mut cases: Vec<(String, Vec<u8>, Option<String>, bool)> = Vec::new();
    for b in &ingested.bytecode {
        let Some(bytes) = &b.bytes else { continue };
        if bytes.len() < 16 {
            continue;
        }
        let (source, importable_alone) = source_of(&b.path);
        let source = submitted.contains(source.as_str()).then_some(source);
        if source.is_none() && !importable_alone {
            continue;
        }
        cases.push((b.path.clone(), bytes.clone(), source, importable_alone));
    }
    if cases.is_empty() || sandbox.config().tool_dir.is_none() {
        return Ok(Vec::new());
    }
    let io = |context: String| move |source| RunError::Io { context, source };
    let work = crate::workdir::WorkDir::new("gatehouse-pyc-")
        .map_err(io("creating a folder for the bytecode check".into()))?;
    let empty = work.path().join("empty");
    std::fs::create_dir_all(&empty).map_err(io("creating a folder".into()))?;
    let mut command =
        format!("python3 -I {}/gatehouse_pyc.py out.json", crate::sandbox::TOOL_MOUNT);
    let mut names = BTreeMap::new();
    for (i, (path, _, source, _)) in cases.iter().enumerate() {
        command.push_str(&format!(" c{i}.pyc"));
        if source.is_some() {
            command.push_str(&format!("=s{i}.py"));
        }
        names.insert(format!("c{i}.pyc"), path.clone());
    }
    let scratch = work.path().join("run");
    let ran = crate::run::run_on_copy(
        sandbox,
        &empty,
        &scratch,
        |w: &Path| {
            for (i, (_, bytes, source, _)) in cases.iter().enumerate() {
                std::fs::write(w.join(format!("c{i}.pyc")), bytes)?;
                if let Some(s) = source {
                    std::fs::copy(ingested.dir.join(s), w.join(format!("s{i}.py")))?;
                }
            }
            Ok(())
        },
        &command,
        &crate::sandbox::Limits {
            wall: std::time::Duration::from_secs(60),
            ..crate::sandbox::Limits::default()
        },
        Vec::new(),
    )?;
    let out = std::fs::read(scratch.join("out.json")).map_err(|e| RunError::Io {
        context: format!("the bytecode check wrote no result ({})", ran.report.describe()),
        source: e,
    })?;
    #[derive(serde::Deserialize)]
    struct Verdict {
        verdict: String,
        why: String,
    }
    let verdicts: BTreeMap<String, Verdict> =
        serde_json::from_slice(&out).map_err(|e| RunError::Io {
            context: "the bytecode check's result".into(),
            source: std::io::Error::other(e),
        })?;
    let mut signs = Vec::new();
    for (name, v) in verdicts {
        let Some(path) = names.get(&name) else { continue };
        let case = cases.iter().find(|c| &c.0 == path);
        let source = case.and_then(|c| c.2.clone());
        match v.verdict.as_str() {
            "differs" => signs.push(format!(
                "bytecode that is not its source: `{path}` ({}) would run instead of `{}`; it was set aside and never run",
                v.why,
                source.unwrap_or_default()
            )),
            "sourceless" if case.is_some_and(|c| c.3) => signs.push(format!(
                "bytecode without source: `{path}` would be imported as a module no reviewer can read; it was set aside and never run"
            )),
            _ => {}
        }
    }
    Ok(signs)
}

#[cfg(test)]
mod tests {
    use super::source_of;

    #[test]
    fn caches_name_their_sources() {
        for (pyc, src, alone) in [
            ("__pycache__/bucket.cpython-311.pyc", "bucket.py", false),
            ("pkg/__pycache__/m.cpython-311.opt-1.pyc", "pkg/m.py", false),
            ("bucket.pyc", "bucket.py", true),
            ("pkg/m.pyo", "pkg/m.py", true),
            ("not__pycache__/x.pyc", "not__pycache__/x.py", true),
        ] {
            assert_eq!(source_of(pyc), (src.to_string(), alone), "{pyc}");
        }
    }
}
