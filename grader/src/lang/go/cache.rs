//! The Go judge's builds, kept between runs (issue #45).
//!
//! A run judged apart builds three programs (`harness/gatehouse_go_runner.py`,
//! class `Apart`): the stub generator (trusted code alone), the judge's
//! test binary (the hidden tests and the stub of the candidate's package,
//! never the candidate's code) and the host's server (the candidate's
//! package). Each is a function of its inputs, which the runner hashes
//! into a KEY: the generator's and the test binary's inputs are the
//! grader's files and the declarations the hidden tests use, so two
//! submissions whose used declarations agree share a test binary; the
//! server's are every file of the submission's module, so the steps of one
//! grading share one server.
//!
//! INVARIANTS.
//! - Only the judge's uid writes what is kept: the runner exports what it
//!   built to `/evidence/go-cache/<kind>-<key>` (the evidence folder is the
//!   judge's alone in a run with two uids), and [`GoCache::harvest`] takes
//!   entries from a run only when the sandbox says the two uids were in
//!   effect (`RunReport::apart`). A run on one uid keeps nothing.
//! - What is kept is laid only into runs judged apart, as files only the
//!   judge's uid reads (`HostSpec::judge_only`): a test binary holds hidden
//!   tests, a server one submission's code. The runner uses a laid file
//!   only under the name of the key it computed itself.
//! - A server is laid only into runs of the submission it was built from
//!   (the scope is the archive's digest); test binaries into the runs of
//!   the step they were built for (packet and step), whatever the
//!   submission.
//! - The folder is the grader's own (0700), never mounted; the evidence
//!   subfolder is removed from the run's copy whether it was kept or not,
//!   so nothing downstream (kept evidence, receipts) sees it.
//! - Bounded: a few entries per scope, the oldest dropped, each at most
//!   [`MAX_ENTRY`] bytes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Where a run finds what was kept for it, under its workspace.
pub const LAID_DIR: &str = ".gatehouse/go-cache";
/// Where the runner exports what it built, under the evidence folder.
pub const EXPORT_DIR: &str = "go-cache";
/// The largest program kept.
pub const MAX_ENTRY: u64 = 96 << 20;
/// Entries kept per scope.
const PER_SCOPE: usize = 3;

/// The kept builds of one grader.
pub struct GoCache {
    dir: crate::workdir::WorkDir,
    /// Scope → entry names, newest last.
    index: Mutex<BTreeMap<String, Vec<String>>>,
    /// Entries taken from runs, by kind: a run exports only what it built,
    /// so a run that found its builds kept adds nothing here.
    taken: Mutex<BTreeMap<&'static str, usize>>,
}

/// Which kept builds a run may use and under which scopes it keeps new
/// ones: the step's (test binaries) and the submission's (servers).
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    pub cache: &'a GoCache,
    /// `packet/step`.
    pub step: &'a str,
    pub packet: &'a str,
    /// The submission's archive digest.
    pub submission: &'a str,
}

/// The kind of an entry's name: `gen-`, `test-` or `server-` and 64 hex
/// digits.
fn kind(name: &str) -> Option<&'static str> {
    let (kind, key) = name.split_once('-')?;
    let kind = match kind {
        "gen" => "gen",
        "test" => "test",
        "server" => "server",
        _ => return None,
    };
    (key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
        .then_some(kind)
}

impl Scope<'_> {
    fn scope_of(&self, kind: &str) -> String {
        match kind {
            "gen" => "gen".to_string(),
            "test" => format!("test:{}/{}", self.packet, self.step),
            _ => format!("server:{}", self.submission),
        }
    }

    fn scopes(&self) -> [String; 3] {
        [self.scope_of("gen"), self.scope_of("test"), self.scope_of("server")]
    }
}

impl GoCache {
    pub fn new() -> std::io::Result<GoCache> {
        let dir = crate::workdir::WorkDir::new("gatehouse-go-cache-")?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        Ok(GoCache { dir, index: Mutex::new(BTreeMap::new()), taken: Mutex::new(BTreeMap::new()) })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Replaces `scratch`'s [`LAID_DIR`] (whatever a submission put there
    /// goes) with copies of what is kept for `scope`; returns the folder's
    /// workspace path when anything was laid (for `HostSpec::judge_only`).
    pub fn lay(&self, scope: &Scope, scratch: &Path) -> std::io::Result<Option<String>> {
        let names: Vec<String> = self.names(scope);
        let root = crate::root::Root::open(scratch)?;
        root.remove(LAID_DIR)?;
        let mut any = false;
        for name in names {
            let Ok(bytes) = std::fs::read(self.path(&name)) else { continue };
            let rel = format!("{LAID_DIR}/{name}");
            root.write(&rel, &bytes)?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(scratch.join(&rel), std::fs::Permissions::from_mode(0o700))?;
            any = true;
        }
        Ok(any.then(|| LAID_DIR.to_string()))
    }

    /// Takes what the run exported (`.gatehouse/evidence/go-cache/` of
    /// `scratch`) when `apart` (two uids were in effect), and removes that
    /// folder from the run's copy either way.
    pub fn harvest(&self, scope: &Scope, scratch: &Path, apart: bool) {
        let export = scratch.join(crate::sandbox::EVIDENCE_DIR).join(EXPORT_DIR);
        if apart && let Ok(entries) = std::fs::read_dir(&export) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let Some(kind) = kind(&name) else { continue };
                let Ok(meta) = std::fs::symlink_metadata(entry.path()) else { continue };
                if !meta.is_file() || meta.len() > MAX_ENTRY {
                    continue;
                }
                let tmp = self.path(&format!(".{name}.tmp"));
                if std::fs::copy(entry.path(), &tmp).is_err()
                    || std::fs::rename(&tmp, self.path(&name)).is_err()
                {
                    let _ = std::fs::remove_file(&tmp);
                    continue;
                }
                self.keep(&scope.scope_of(kind), &name);
                *self.taken.lock().unwrap_or_else(|e| e.into_inner()).entry(kind).or_default() += 1;
            }
        }
        let _ = std::fs::remove_dir_all(&export);
    }

    fn keep(&self, scope: &str, name: &str) {
        let mut index = self.index.lock().unwrap_or_else(|e| e.into_inner());
        let list = index.entry(scope.to_string()).or_default();
        list.retain(|n| n != name);
        list.push(name.to_string());
        let dropped: Vec<String> = list.drain(..list.len().saturating_sub(PER_SCOPE)).collect();
        // A server scope per submission: keep the last few submissions'.
        let servers: Vec<String> =
            index.keys().filter(|k| k.starts_with("server:")).cloned().collect();
        let mut gone = dropped;
        if servers.len() > PER_SCOPE {
            for k in &servers[..servers.len() - PER_SCOPE] {
                if k != scope {
                    gone.extend(index.remove(k).unwrap_or_default());
                }
            }
        }
        for name in gone {
            if !index.values().any(|l| l.contains(&name)) {
                let _ = std::fs::remove_file(self.path(&name));
            }
        }
    }

    /// How many entries of `kind` (`gen`, `test`, `server`) runs have
    /// exported so far: what was built rather than found kept.
    pub fn taken(&self, kind: &str) -> usize {
        self.taken.lock().unwrap_or_else(|e| e.into_inner()).get(kind).copied().unwrap_or(0)
    }

    /// The names kept for `scope` (tests).
    #[doc(hidden)]
    pub fn names(&self, scope: &Scope) -> Vec<String> {
        let index = self.index.lock().unwrap_or_else(|e| e.into_inner());
        scope.scopes().iter().flat_map(|s| index.get(s).cloned().unwrap_or_default()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: char) -> String {
        std::iter::repeat_n(c, 64).collect()
    }

    #[test]
    fn only_named_regular_files_of_a_two_uid_run_are_kept() {
        let cache = GoCache::new().unwrap();
        let scope = Scope { cache: &cache, step: "retry", packet: "p", submission: "s1" };
        let run = tempfile::tempdir().unwrap();
        let export = run.path().join(crate::sandbox::EVIDENCE_DIR).join(EXPORT_DIR);
        let put = |name: &str| {
            std::fs::create_dir_all(&export).unwrap();
            std::fs::write(export.join(name), name).unwrap();
        };
        for name in [
            format!("test-{}", key('a')),
            format!("server-{}", key('b')),
            format!("gen-{}", key('c')),
            format!("test-{}", key('A')),
            "test-short".to_string(),
            format!("other-{}", key('d')),
        ] {
            put(&name);
        }
        std::os::unix::fs::symlink("/etc/passwd", export.join(format!("server-{}", key('e'))))
            .unwrap();
        // One uid: nothing kept, the export removed all the same.
        cache.harvest(&scope, run.path(), false);
        assert!(cache.names(&scope).is_empty());
        assert!(!export.exists());
        put(&format!("test-{}", key('a')));
        put(&format!("server-{}", key('b')));
        put(&format!("gen-{}", key('c')));
        put(&format!("test-{}", key('A')));
        cache.harvest(&scope, run.path(), true);
        let mut names = cache.names(&scope);
        names.sort();
        assert_eq!(
            names,
            [
                format!("gen-{}", key('c')),
                format!("server-{}", key('b')),
                format!("test-{}", key('a'))
            ]
        );
        // Laid into another run of the step: the server only for the same
        // submission.
        let other = Scope { submission: "s2", ..scope };
        let next = tempfile::tempdir().unwrap();
        // A submission's own folder of that name goes first.
        std::fs::create_dir_all(next.path().join(LAID_DIR)).unwrap();
        std::fs::write(next.path().join(LAID_DIR).join(format!("test-{}", key('f'))), "forged")
            .unwrap();
        let laid = cache.lay(&other, next.path()).unwrap();
        assert_eq!(laid.as_deref(), Some(LAID_DIR));
        let listed = |dir: &Path| {
            let mut names: Vec<String> = std::fs::read_dir(dir.join(LAID_DIR))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        assert_eq!(
            listed(next.path()),
            [format!("gen-{}", key('c')), format!("test-{}", key('a'))]
        );
        let again = tempfile::tempdir().unwrap();
        cache.lay(&scope, again.path()).unwrap();
        assert!(listed(again.path()).contains(&format!("server-{}", key('b'))));
        // Nothing kept for a scope: nothing laid, the folder removed.
        let empty = GoCache::new().unwrap();
        let forged = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(forged.path().join(LAID_DIR)).unwrap();
        assert_eq!(empty.lay(&Scope { cache: &empty, ..scope }, forged.path()).unwrap(), None);
        assert!(!forged.path().join(LAID_DIR).exists());
        // Another step of the packet gets the generator alone.
        let step = Scope { step: "url", ..scope };
        assert_eq!(
            cache.names(&step),
            [format!("gen-{}", key('c')), format!("server-{}", key('b'))]
        );
    }

    #[test]
    fn scopes_keep_a_few_entries() {
        let cache = GoCache::new().unwrap();
        let run = tempfile::tempdir().unwrap();
        let export = run.path().join(crate::sandbox::EVIDENCE_DIR).join(EXPORT_DIR);
        for (i, c) in ['1', '2', '3', '4', '5'].into_iter().enumerate() {
            let sub = format!("s{i}");
            let scope = Scope { cache: &cache, step: "retry", packet: "p", submission: &sub };
            std::fs::create_dir_all(&export).unwrap();
            std::fs::write(export.join(format!("test-{}", key(c))), "t").unwrap();
            std::fs::write(export.join(format!("server-{}", key(c))), "s").unwrap();
            cache.harvest(&scope, run.path(), true);
        }
        let scope = Scope { cache: &cache, step: "retry", packet: "p", submission: "s4" };
        let names = cache.names(&scope);
        assert_eq!(
            names,
            [
                format!("test-{}", key('3')),
                format!("test-{}", key('4')),
                format!("test-{}", key('5')),
                format!("server-{}", key('5'))
            ]
        );
        let files = std::fs::read_dir(cache.dir.path()).unwrap().count();
        assert_eq!(files, 3 + PER_SCOPE, "dropped entries are removed");
    }
}
