//! A packet on disk: its manifest, its files and its digest, plus the file
//! tree operations the pipeline uses to assemble workspaces.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::manifest::{Lay, Manifest, ManifestError};

/// A loaded packet folder.
#[derive(Debug, Clone)]
pub struct Packet {
    pub root: PathBuf,
    pub manifest: Manifest,
    /// Hex SHA-256 over every file of the packet (paths and contents).
    pub digest: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PacketError {
    #[error("{0}")]
    Manifest(#[from] ManifestError),
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("{0}")]
    Layout(String),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> PacketError + '_ {
    move |source| PacketError::Io { path: path.display().to_string(), source }
}

impl Packet {
    /// Reads and validates the packet folder `root`.
    pub fn load(root: &Path) -> Result<Packet, PacketError> {
        let manifest_path = root.join("packet.toml");
        let src = fs::read_to_string(&manifest_path).map_err(io_err(&manifest_path))?;
        let manifest = Manifest::parse(&manifest_path.display().to_string(), &src)?;
        let folder = root.canonicalize().map_err(io_err(root))?;
        let name = folder.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name != manifest.packet.slug {
            return Err(PacketError::Layout(format!(
                "{}: slug {:?} does not match the folder name {name:?}",
                manifest_path.display(),
                manifest.packet.slug
            )));
        }
        for dir in ["starter"] {
            if !root.join(dir).is_dir() {
                return Err(PacketError::Layout(format!("{}: the packet has no {dir}/ folder", root.display())));
            }
        }
        if !root.join("prompt.md").is_file() {
            return Err(PacketError::Layout(format!("{}: the packet has no prompt.md", root.display())));
        }
        refuse_links(root)?;
        let packet = Packet { root: root.to_path_buf(), manifest, digest: String::new() };
        packet.check_files()?;
        let digest = tree_digest(&list_files(root).map_err(io_err(root))?);
        Ok(Packet { digest, ..packet })
    }

    /// Checks that every file the manifest names exists.
    fn check_files(&self) -> Result<(), PacketError> {
        let m = &self.manifest;
        let missing = |what: String, p: &Path| {
            PacketError::Layout(format!("{}: {what} {} does not exist", self.root.join("packet.toml").display(), p.display()))
        };
        let mut lays: Vec<&Lay> = m.steps.iter().flat_map(|s| &s.lay).collect();
        for f in &m.failures {
            f.detect.walk(&mut |d| {
                if let crate::manifest::Detector::Script { lay, .. } = d {
                    lays.extend(lay);
                }
            });
        }
        for lay in lays {
            let from = self.root.join(lay.paths().0);
            if !from.exists() {
                return Err(missing("laid file".into(), &from));
            }
        }
        for v in &m.variants {
            let dir = self.root.join("variants").join(&v.name);
            if !dir.is_dir() && v.remove.is_empty() && !self.variant_patch(&v.name).is_file() {
                return Err(missing(format!("folder of variant {:?}", v.name), &dir));
            }
        }
        if m.mutation.is_some() && self.mutants().map_err(io_err(&self.root))?.is_empty() {
            return Err(PacketError::Layout(format!("{}: [mutation] is set but mutants/ holds no mutant", self.root.display())));
        }
        if !crate::manifest::is_safe_relative(&m.packet.brief) || self.root.join("starter").join(&m.packet.brief).exists() {
            return Err(PacketError::Layout(format!(
                "{}: the brief is shipped as {:?}, which must be a new relative path, not a starter file",
                self.root.join("packet.toml").display(),
                m.packet.brief
            )));
        }
        for f in &m.packet.seed_files {
            if !self.root.join("starter").join(f).is_file() {
                return Err(missing("seed file".into(), &self.root.join("starter").join(f)));
            }
        }
        Ok(())
    }

    pub fn starter_dir(&self) -> PathBuf {
        self.root.join("starter")
    }

    pub fn sample_dir(&self) -> PathBuf {
        self.root.join("sample")
    }

    /// The optional unified diff of a variant, `variants/<name>.diff`.
    pub fn variant_patch(&self, name: &str) -> PathBuf {
        self.root.join("variants").join(format!("{name}.diff"))
    }

    /// Writes variant `v`'s submission to `dest`: the sample, less `remove`,
    /// overlaid by `variants/<name>/`, then patched by `variants/<name>.diff`
    /// (whose files are taken from that tree, else from the starter).
    pub fn write_variant(&self, v: &crate::manifest::Variant, dest: &Path) -> io::Result<()> {
        if self.sample_dir().is_dir() {
            copy_path(&self.sample_dir(), dest)?;
        }
        fs::create_dir_all(dest)?;
        remove_paths(dest, &v.remove)?;
        let vdir = self.variant_dir(&v.name);
        if vdir.is_dir() {
            copy_path(&vdir, dest)?;
        }
        let patch = self.variant_patch(&v.name);
        if patch.is_file() {
            let text = fs::read_to_string(&patch)?;
            let err = |e: String| io::Error::other(format!("{}: {e}", patch.display()));
            for (path, diff) in split_diff(&text).map_err(err)? {
                let target = safe_join(dest, &path).map_err(|e| err(e.to_string()))?;
                let base = [target.clone(), safe_join(&self.starter_dir(), &path)?]
                    .into_iter()
                    .find(|p| p.is_file())
                    .map(fs::read_to_string)
                    .transpose()?
                    .unwrap_or_default();
                write_file(&target, apply_diff(&base, &diff).map_err(|e| err(format!("{path}: {e}")))?.as_bytes())?;
            }
        }
        Ok(())
    }

    pub fn variant_dir(&self, name: &str) -> PathBuf {
        self.root.join("variants").join(name)
    }

    pub fn prompt(&self) -> io::Result<String> {
        fs::read_to_string(self.root.join("prompt.md"))
    }

    /// Mutants as (id, path), sorted by id.
    /// Mutants as (id, contents of the mutated target), sorted by id. A
    /// mutant is a file in `mutants/`: either a unified diff (`.diff`)
    /// against the sample's target file, applied here, or the whole
    /// mutated file.
    pub fn mutants(&self) -> io::Result<Vec<(String, Vec<u8>)>> {
        let dir = self.root.join("mutants");
        if !dir.is_dir() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for entry in fs::read_dir(&dir)? {
            let path = entry?.path();
            if !path.is_file() {
                continue;
            }
            let id = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
            let bytes = if path.extension().is_some_and(|e| e == "diff") {
                let target = self.manifest.mutation.as_ref().map(|m| m.target.clone()).ok_or_else(|| {
                    io::Error::other(format!("{}: a diff mutant needs [mutation] target", path.display()))
                })?;
                let original = match fs::read_to_string(safe_join(&self.sample_dir(), &target)?) {
                    Ok(t) => t,
                    Err(_) => fs::read_to_string(safe_join(&self.starter_dir(), &target)?)?,
                };
                let diff = fs::read_to_string(&path)?;
                apply_diff(&original, &diff).map_err(|e| io::Error::other(format!("{}: {e}", path.display())))?.into_bytes()
            } else {
                fs::read(&path)?
            };
            out.push((id, bytes));
        }
        out.sort();
        Ok(out)
    }

    /// Lays `lays` from the packet into `workspace`; neither end may
    /// leave its folder.
    pub fn lay_into(&self, lays: &[Lay], workspace: &Path) -> io::Result<()> {
        for lay in lays {
            let (from, to) = lay.paths();
            copy_path(&safe_join(&self.root, &from)?, &safe_join(workspace, &to)?)?;
        }
        Ok(())
    }
}

/// A file of a tree: relative path to (size, hex SHA-256).
pub type Tree = BTreeMap<String, (u64, String)>;

/// Lists the regular files under `root` with their digests. Symbolic links
/// are not followed and not listed.
pub fn list_files(root: &Path) -> io::Result<Tree> {
    let mut tree = Tree::new();
    for entry in walkdir::WalkDir::new(root).follow_links(false).sort_by_file_name() {
        let entry = entry.map_err(io::Error::other)?;
        if !entry.file_type().is_file() {
            continue;
        }
        let rel = relative(root, entry.path());
        let bytes = fs::read(entry.path())?;
        tree.insert(rel, (bytes.len() as u64, sha256_hex(&bytes)));
    }
    Ok(tree)
}

/// Relative paths of the regular files under `root`, sorted.
pub fn list_paths(root: &Path) -> Vec<String> {
    walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| relative(root, e.path()))
        .collect()
}

/// The digest of a tree: SHA-256 over `path\0sha\n` lines in path order.
pub fn tree_digest(tree: &Tree) -> String {
    let mut h = Sha256::new();
    for (path, (_, sha)) in tree {
        h.update(path.as_bytes());
        h.update([0]);
        h.update(sha.as_bytes());
        h.update([b'\n']);
    }
    hex::encode(h.finalize())
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `path` relative to `root`, with `/` separators.
pub fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// Copies a file or a folder (recursively, regular files only) to `to`,
/// creating parents and overwriting files.
pub fn copy_path(from: &Path, to: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(from)?;
    if meta.is_dir() {
        for entry in walkdir::WalkDir::new(from).follow_links(false) {
            let entry = entry.map_err(io::Error::other)?;
            let dest = to.join(entry.path().strip_prefix(from).unwrap_or(entry.path()));
            if entry.file_type().is_dir() {
                fs::create_dir_all(&dest)?;
            } else if entry.file_type().is_file() {
                copy_file(entry.path(), &dest)?;
            }
        }
        Ok(())
    } else if meta.is_file() {
        copy_file(from, to)
    } else {
        Err(io::Error::other(format!("{} is neither a file nor a folder", from.display())))
    }
}

fn copy_file(from: &Path, to: &Path) -> io::Result<()> {
    clear_for(to)?;
    fs::copy(from, to).map(drop)
}

/// Writes `bytes` to `to`, creating parents and replacing what is there.
pub fn write_file(to: &Path, bytes: &[u8]) -> io::Result<()> {
    clear_for(to)?;
    fs::write(to, bytes)
}

/// Makes room for a new file at `to`.
fn clear_for(to: &Path) -> io::Result<()> {
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent)?;
    }
    // A file in the way may be a symbolic link planted by a submission; it
    // is replaced, never written through.
    if fs::symlink_metadata(to).is_ok() {
        if fs::symlink_metadata(to)?.is_dir() {
            fs::remove_dir_all(to)?;
        } else {
            fs::remove_file(to)?;
        }
    }
    Ok(())
}

/// Removes `paths` (relative) from `root` where they exist; a path that
/// would leave `root` is an error, and nothing is removed through a link.
pub fn remove_paths(root: &Path, paths: &[String]) -> io::Result<()> {
    for p in paths {
        let path = safe_join(root, p)?;
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => fs::remove_dir_all(&path)?,
            Ok(_) => fs::remove_file(&path)?,
            Err(_) => {}
        }
    }
    Ok(())
}

/// `root` joined with the relative path `rel`, refusing any path that could
/// leave `root`: absolute, with `..`, `.` or empty components, or through a
/// symbolic link anywhere below `root`. Every read and write of packet or
/// workspace files by a path the packet names goes through here.
pub fn safe_join(root: &Path, rel: &str) -> io::Result<PathBuf> {
    if !crate::manifest::is_safe_relative(rel) || rel.contains('\\') || rel.contains('\0') {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{rel:?} is not a safe relative path (absolute, `..`, or empty parts)")));
    }
    let mut path = root.to_path_buf();
    for part in rel.split('/') {
        path.push(part);
        match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{rel:?} goes through the symbolic link {}; links are never followed", path.display())));
            }
            Ok(_) => {}
            // Nothing further down exists yet, so no link either.
            Err(_) => break,
        }
    }
    Ok(root.join(rel))
}

/// Refuses a packet folder holding a symbolic link (or a device, socket
/// or FIFO) anywhere: packets are imported from elsewhere, and a link
/// could point the grader at any host file.
pub fn refuse_links(root: &Path) -> Result<(), PacketError> {
    for entry in walkdir::WalkDir::new(root).follow_links(false).min_depth(1) {
        let entry = entry.map_err(|e| PacketError::Layout(format!("{}: {e}", root.display())))?;
        let t = entry.file_type();
        if t.is_symlink() {
            return Err(PacketError::Layout(format!("{}: a symbolic link; a packet may not contain links", entry.path().display())));
        }
        if !t.is_dir() && !t.is_file() {
            return Err(PacketError::Layout(format!("{}: not a regular file or folder", entry.path().display())));
        }
    }
    Ok(())
}

/// Fills `template` by replacing `{{seed}}` with `seed`.
pub fn apply_seed(text: &str, seed: &str) -> String {
    text.replace("{{seed}}", seed)
}

/// Splits a multi-file unified diff into (path, single-file diff) parts,
/// the path taken from each `+++` line without its `b/` prefix.
pub fn split_diff(text: &str) -> Result<Vec<(String, String)>, String> {
    crate::detect::parse_unified_diff(text)?;
    let mut parts: Vec<(String, String)> = Vec::new();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].starts_with("--- ") && lines.get(i + 1).is_some_and(|l| l.starts_with("+++ ")) {
            let new = lines[i + 1][4..].split('\t').next().unwrap_or_default().trim();
            let path = new.strip_prefix("b/").unwrap_or(new).to_string();
            if !crate::manifest::is_safe_relative(&path) {
                return Err(format!("`{new}` is not a relative path inside the tree"));
            }
            parts.push((path, format!("{}{}", lines[i], lines[i + 1])));
            i += 2;
        } else {
            if let Some((_, part)) = parts.last_mut() {
                if !lines[i].starts_with("diff ") {
                    part.push_str(lines[i]);
                }
            }
            i += 1;
        }
    }
    Ok(parts)
}

/// Applies a single-file unified diff to `original`, requiring every
/// context and removed line to match exactly (no fuzz, no offsets).
pub fn apply_diff(original: &str, diff: &str) -> Result<String, String> {
    crate::detect::parse_unified_diff(diff)?;
    let old: Vec<&str> = original.split_inclusive('\n').collect();
    let mut out = String::new();
    let mut at = 0usize;
    let hunk = regex::Regex::new(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@").expect("static regex");
    let lines: Vec<&str> = diff.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let Some(c) = hunk.captures(lines[i]) else {
            i += 1;
            continue;
        };
        let start: usize = c[1].parse().map_err(|_| format!("bad hunk header `{}`", lines[i]))?;
        let len: usize = c.get(2).map_or(Ok(1), |m| m.as_str().parse()).map_err(|_| format!("bad hunk header `{}`", lines[i]))?;
        // A hunk of zero old lines inserts after line `start`.
        let begin = if len == 0 { start } else { start.saturating_sub(1) };
        if begin < at || begin > old.len() {
            return Err(format!("hunk `{}` is out of order or past the end", lines[i]));
        }
        out.extend(old[at..begin].iter().copied());
        at = begin;
        i += 1;
        while i < lines.len() && !lines[i].starts_with("@@") && !lines[i].starts_with("--- ") {
            let line = lines[i];
            // The first character, not byte: a line the parser lets through
            // between hunks (`\u{3000}` is blank to `trim`) may start with a
            // multi-byte one.
            let (kind, text) = line.split_at(line.chars().next().map_or(0, char::len_utf8));
            match kind {
                " " | "-" => {
                    let have = old.get(at).map(|l| l.trim_end_matches('\n')).ok_or("the diff runs past the end of the file")?;
                    if have != text {
                        return Err(format!("line {}: expected `{text}`, found `{have}`", at + 1));
                    }
                    if kind == " " {
                        out.push_str(old[at]);
                    }
                    at += 1;
                }
                "+" => {
                    out.push_str(text);
                    out.push('\n');
                }
                "" if line.is_empty() => {
                    // An empty context line whose leading space was trimmed.
                    let have = old.get(at).map(|l| l.trim_end_matches('\n')).ok_or("the diff runs past the end of the file")?;
                    if !have.is_empty() {
                        return Err(format!("line {}: expected an empty line, found `{have}`", at + 1));
                    }
                    out.push_str(old[at]);
                    at += 1;
                }
                _ => {}
            }
            i += 1;
        }
    }
    out.extend(old[at..].iter().copied());
    Ok(out)
}


#[cfg(test)]
mod tests {
    use super::{apply_diff, split_diff};

    fn check(original: &str, diff: &str, expect: Result<&str, &str>) {
        match (apply_diff(original, diff), expect) {
            (Ok(got), Ok(want)) => assert_eq!(got, want),
            (Err(e), Err(want)) => assert!(e.contains(want), "{e:?} lacks {want:?}"),
            (got, want) => panic!("got {got:?}, want {want:?}"),
        }
    }

    const SRC: &str = "def total(rows):\n    s = 0\n    for r in rows:\n        s += r\n\n    return s\n";

    #[test]
    fn applies_exact_hunks() {
        let diff = "--- a/t.py\n+++ b/t.py\n@@ -3,2 +3,2 @@\n     for r in rows:\n-        s += r\n+        s += abs(r)\n";
        check(SRC, diff, Ok("def total(rows):\n    s = 0\n    for r in rows:\n        s += abs(r)\n\n    return s\n"));
        // Two hunks, one across an empty context line, one inserting.
        let diff = "--- a/t.py\n+++ b/t.py\n@@ -1 +1,2 @@\n def total(rows):\n+    rows = list(rows)\n@@ -4,3 +5,3 @@\n         s += r\n\n-    return s\n+    return -s\n";
        check(SRC, diff, Ok("def total(rows):\n    rows = list(rows)\n    s = 0\n    for r in rows:\n        s += r\n\n    return -s\n"));
    }

    #[test]
    fn refuses_what_does_not_match() {
        let diff = "--- a/t.py\n+++ b/t.py\n@@ -2 +2 @@\n-    s = 1\n+    s = 2\n";
        check(SRC, diff, Err("line 2: expected `    s = 1`, found `    s = 0`"));
        check(SRC, "just prose\n", Err("not part of a unified diff"));
        let past = "--- a/t.py\n+++ b/t.py\n@@ -9 +9 @@\n-x\n+y\n";
        check(SRC, past, Err("past the end"));
    }

    #[test]
    fn a_multibyte_line_between_hunks_is_not_a_crash() {
        // Found by tests/it/fuzz.rs: this panicked slicing inside `\u{3000}`.
        check("\n", "--- a/a\n+++ b/a\n@@ -1,0 +1,0 @@\n\u{3000}", Ok("\n"));
        check("x\n", "--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+\u{e9}\n\u{a0}\u{2003}\n", Ok("\u{e9}\n"));
    }

    #[test]
    fn splits_multi_file_diffs() {
        let diff = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n--- /dev/null\n+++ b/new/b.py\n@@ -0,0 +1 @@\n+z\n";
        let parts = split_diff(diff).unwrap();
        let paths: Vec<&str> = parts.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["a.py", "new/b.py"]);
        assert_eq!(apply_diff("x\n", &parts[0].1).unwrap(), "y\n");
        assert_eq!(apply_diff("", &parts[1].1).unwrap(), "z\n");
        assert!(split_diff("--- a/x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n").unwrap_err().contains("not a relative path"));
    }
}
