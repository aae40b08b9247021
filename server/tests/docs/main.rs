//! Docs that cannot rot silently. Every Markdown file of the repository
//! (the files git tracks or would track: `target/`, `node_modules/` and
//! anything gitignored are left out) is parsed as GitHub renders it and
//! checked against what it describes:
//!
//! - `links`: relative links and `#anchors` resolve;
//! - `commands`: every `gatehouse` command line is one the CLI parses;
//! - `settings`: every `GATEHOUSE_*` variable is read by the configuration
//!   or by code, every configuration key is documented (with its variable
//!   and default) and documented keys exist, `# gatehouse.toml` blocks are
//!   read as the server reads its file;
//! - `diary`: no commit names in user-facing docs, and the README and
//!   ARCHITECTURE.md stay short.
//!
//! Each rule has a data-driven test that makes it fire on a small bad input
//! (`check(input, expect)`) and a test that it stays quiet on the
//! repository's own docs. docs/tests.md says how to read a failure.

mod commands;
mod diary;
mod links;
mod markdown;
mod settings;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// One Markdown file: its path from the repository's root (`/`-separated)
/// and its text.
#[derive(Debug)]
pub struct Doc {
    pub path: String,
    pub text: String,
}

/// The repository's files and the folders holding them (the root is `""`).
#[derive(Default)]
pub struct Files {
    pub files: BTreeSet<String>,
    pub dirs: BTreeSet<String>,
}

impl Files {
    fn add(&mut self, path: &str) {
        self.files.insert(path.to_string());
        let mut dir = path;
        while let Some((parent, _)) = dir.rsplit_once('/') {
            self.dirs.insert(parent.to_string());
            dir = parent;
        }
        self.dirs.insert(String::new());
    }
}

/// What the checks read of the repository.
pub struct Repo {
    pub files: Files,
    pub docs: Vec<Doc>,
    /// `GATEHOUSE_*` variables code (anything but Markdown) reads.
    pub variables_read: BTreeSet<String>,
    /// The hex words of the docs that name commits of the repository.
    pub commits: BTreeSet<String>,
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

fn is_markdown(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(".md") || lower.ends_with(".markdown")
}

/// The repository's files: git's list of tracked and untracked files that
/// are not ignored, or, without git, a walk that leaves out `target/`,
/// `node_modules/` and hidden folders (but `.ci/`).
fn list_files(root: &Path) -> Vec<String> {
    let git = Command::new("git")
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .current_dir(root)
        .stderr(Stdio::null())
        .output();
    if let Ok(out) = git
        && out.status.success()
    {
        return out
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .filter(|p| root.join(p).is_file())
            .collect();
    }
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                let skip = name == "target"
                    || name == "node_modules"
                    || (name.starts_with('.') && name != ".ci");
                if !skip {
                    stack.push(path);
                }
            } else if kind.is_file() {
                let rel = path.strip_prefix(root).expect("under the root");
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out
}

/// Which of `words` name commits of the repository at `root` (one
/// `git cat-file --batch-check`; none without git).
fn commits(root: &Path, words: &BTreeSet<String>) -> BTreeSet<String> {
    use std::io::Write;
    let child = Command::new("git")
        .args(["cat-file", "--batch-check"])
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else { return BTreeSet::new() };
    let mut input = String::new();
    for w in words {
        input.push_str(&format!("{w}^{{commit}}\n"));
    }
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("git cat-file");
    let _ = writer.join();
    let answers = String::from_utf8_lossy(&out.stdout);
    // One answer a line, in order: `<sha> commit <size>`, or `<word> missing`
    // (or `ambiguous`, which names commits too).
    words
        .iter()
        .zip(answers.lines())
        .filter(|(_, a)| a.contains(" commit ") || a.ends_with(" ambiguous"))
        .map(|(w, _)| w.clone())
        .collect()
}

fn load() -> Repo {
    let root = root();
    let mut files = Files::default();
    let mut docs = Vec::new();
    let mut code: Vec<(String, String)> = Vec::new();
    for path in list_files(&root) {
        files.add(&path);
        let full = root.join(&path);
        let small = std::fs::metadata(&full).is_ok_and(|m| m.len() <= 2 << 20);
        let Some(text) = small.then(|| std::fs::read_to_string(&full).ok()).flatten() else {
            continue;
        };
        if is_markdown(&path) {
            docs.push(Doc { path, text });
        } else {
            code.push((path, text));
        }
    }
    docs.sort_by(|a, b| a.path.cmp(&b.path));
    let variables_read =
        settings::code_variables(code.iter().map(|(p, t)| (p.as_str(), t.as_str())));
    let words: BTreeSet<String> = docs
        .iter()
        .filter(|d| diary::user_facing(&d.path))
        .flat_map(|d| diary::hex_words(&d.text).into_iter().map(|(_, w)| w.to_string()))
        .collect();
    let commits = commits(&root, &words);
    Repo { files, docs, variables_read, commits }
}

/// The repository, read once per test binary.
pub fn repo() -> &'static Repo {
    static REPO: OnceLock<Repo> = OnceLock::new();
    REPO.get_or_init(load)
}

/// The command tree the `gatehouse` binary parses, built (help flags and
/// global options in place).
pub fn cli() -> clap::Command {
    let mut cli = gatehouse::cli::command();
    cli.build();
    cli
}

/// A small repository for a rule's test: the given files, the Markdown
/// ones as docs.
pub fn fixture(files: &[(&str, &str)]) -> (Vec<Doc>, Files) {
    let mut all = Files::default();
    let mut docs = Vec::new();
    for (path, text) in files {
        all.add(path);
        if is_markdown(path) {
            docs.push(Doc { path: path.to_string(), text: text.to_string() });
        }
    }
    (docs, all)
}

#[test]
fn the_repository_is_read_whole_and_without_what_git_ignores() {
    let repo = repo();
    let has = |p: &str| repo.files.files.contains(p);
    assert!(has("README.md") && has("server/src/config.rs") && has("packets/FORMAT.md"));
    assert!(
        repo.files.files.iter().all(|p| !p.starts_with("target/") && !p.contains("node_modules/")),
        "build output or installed packages were read"
    );
    assert!(repo.docs.iter().any(|d| d.path.starts_with("docs/")), "docs/ was not read");
}
