//! A packet on disk: its manifest, its files and its digest, plus the file
//! tree operations the pipeline uses to assemble workspaces.
//!
//! An honest alternate is a folder `alternates/<name>/`, a diff
//! `alternates/<name>.diff` applied to the tree a candidate unpacks (brief and
//! pin file included), or both: `Packet::write_alternate` builds it with the
//! same diff applier and `Root` file handle as a variant's `.diff`, and the
//! self-test zips the whole tree as a candidate would hand it back.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::diff::{apply_diff, split_diff};
use crate::manifest::{Lay, Manifest, ManifestError};
use crate::tree::{Kind, Root, list_files, tree_digest};

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
                return Err(PacketError::Layout(format!(
                    "{}: the packet has no {dir}/ folder",
                    root.display()
                )));
            }
        }
        if !root.join("prompt.md").is_file() {
            return Err(PacketError::Layout(format!(
                "{}: the packet has no prompt.md",
                root.display()
            )));
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
        let pk = self.files().map_err(io_err(&self.root))?;
        let missing = |what: String, p: &Path| {
            PacketError::Layout(format!(
                "{}: {what} {} does not exist",
                self.root.join("packet.toml").display(),
                p.display()
            ))
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
            let from = lay.paths().0;
            if !pk.kind(&from).is_ok_and(|k| k.is_some()) {
                return Err(missing("laid file".into(), &self.root.join(from)));
            }
        }
        for v in &m.variants {
            if !pk.is_dir(&format!("variants/{}", v.name))
                && v.remove.is_empty()
                && !pk.is_file(&format!("variants/{}.diff", v.name))
            {
                return Err(missing(
                    format!("folder of variant {:?}", v.name),
                    &self.variant_dir(&v.name),
                ));
            }
        }
        // Every diff of a variant or an alternate parses and names only
        // paths inside the tree (whether its hunks apply is known once the
        // tree it patches is laid: `packet check`).
        let alternates = self.alternates().map_err(|e| PacketError::Layout(e.to_string()))?;
        let diffs = m
            .variants
            .iter()
            .map(|v| format!("variants/{}.diff", v.name))
            .chain(alternates.iter().map(|a| format!("alternates/{a}.diff")));
        for rel in diffs.filter(|rel| pk.is_file(rel)) {
            let shown = self.root.join(&rel);
            let text = pk.read_to_string(&rel).map_err(io_err(&shown))?;
            split_diff(&text)
                .map_err(|e| PacketError::Layout(format!("{}: {e}", shown.display())))?;
        }
        if m.mutation.is_some() && self.mutants().map_err(io_err(&self.root))?.is_empty() {
            return Err(PacketError::Layout(format!(
                "{}: [mutation] is set but mutants/ holds no mutant",
                self.root.display()
            )));
        }
        if !crate::tree::is_safe_relative(&m.packet.brief)
            || pk.kind(&format!("starter/{}", m.packet.brief)).map_or(true, |k| k.is_some())
        {
            return Err(PacketError::Layout(format!(
                "{}: the brief is shipped as {:?}, which must be a new relative path, not a starter file",
                self.root.join("packet.toml").display(),
                m.packet.brief
            )));
        }
        for f in &m.packet.seed_files {
            if !pk.is_file(&format!("starter/{f}")) {
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

    /// The packet folder held open: every read of a packet file goes
    /// through it, so none leaves the folder or follows a link.
    pub fn files(&self) -> io::Result<Root> {
        Root::open(&self.root)
    }

    /// Writes variant `v`'s submission to `dest`: the sample, less `remove`,
    /// overlaid by `variants/<name>/`, then patched by `variants/<name>.diff`
    /// (whose files are taken from that tree, else from the starter).
    pub fn write_variant(&self, v: &crate::manifest::Variant, dest: &Path) -> io::Result<()> {
        let pk = self.files()?;
        let out = Root::create(dest)?;
        if pk.is_dir("sample") {
            pk.copy("sample", &out, "")?;
        }
        for p in &v.remove {
            out.remove(p)?;
        }
        let vdir = format!("variants/{}", v.name);
        if pk.is_dir(&vdir) {
            pk.copy(&vdir, &out, "")?;
        }
        self.apply_patch(&pk, &format!("variants/{}.diff", v.name), &out, Some("starter"))
    }

    /// The packet's honest alternates, sorted by name: each folder
    /// `alternates/<name>/` and each diff `alternates/<name>.diff` (a name
    /// with both is one alternate: the folder, then the diff). Any other
    /// entry (another file, a link) is an error naming it; hidden files
    /// (`.gitkeep`) are passed over.
    pub fn alternates(&self) -> io::Result<Vec<String>> {
        let pk = self.files()?;
        let dir = self.root.join("alternates");
        match pk.kind("alternates")? {
            None => return Ok(Vec::new()),
            Some(Kind::Dir) => {}
            Some(_) => {
                return Err(io::Error::other(format!(
                    "{}: alternates must be a folder of folders and `.diff` files",
                    dir.display()
                )));
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for (name, kind) in pk.entries("alternates")? {
            match (kind, name.strip_suffix(".diff")) {
                (Kind::Dir, _) => names.insert(name),
                (Kind::File, Some(stem)) if !stem.is_empty() && !stem.starts_with('.') => {
                    names.insert(stem.to_string())
                }
                (Kind::File, _) if name.starts_with('.') => continue,
                _ => {
                    return Err(io::Error::other(format!(
                        "{}: an alternate is a folder or a `<name>.diff` laid over the starter, not another file or a link",
                        dir.join(&name).display()
                    )));
                }
            };
        }
        Ok(names.into_iter().collect())
    }

    /// Lays alternate `name` over `tree`, the tree a candidate receives:
    /// the folder `alternates/<name>/` if there is one, then the diff
    /// `alternates/<name>.diff` if there is one, applied to the files of
    /// that tree (a file the tree lacks starts empty).
    pub fn write_alternate(&self, name: &str, tree: &Path) -> io::Result<()> {
        let pk = self.files()?;
        let out = Root::create(tree)?;
        let dir = format!("alternates/{name}");
        if pk.is_dir(&dir) {
            pk.copy(&dir, &out, "")?;
        }
        self.apply_patch(&pk, &format!("alternates/{name}.diff"), &out, None)
    }

    /// Applies the packet's multi-file unified diff `rel`, when there is
    /// one, to the files of `out`: each file is taken from `out`, else from
    /// the packet folder `fallback` (when given), else starts empty. Every
    /// path is read and written through [`Root`], so none leaves its tree;
    /// errors name the diff file and the path the diff failed on.
    fn apply_patch(
        &self,
        pk: &Root,
        rel: &str,
        out: &Root,
        fallback: Option<&str>,
    ) -> io::Result<()> {
        if !pk.is_file(rel) {
            return Ok(());
        }
        let text = pk.read_to_string(rel)?;
        let shown = self.root.join(rel);
        let err = |e: String| io::Error::other(format!("{}: {e}", shown.display()));
        for (path, diff) in split_diff(&text).map_err(err)? {
            let from = fallback.map(|dir| format!("{dir}/{path}"));
            let base = if out.is_file(&path) {
                out.read_to_string(&path)
            } else if let Some(from) = from.filter(|f| pk.is_file(f)) {
                pk.read_to_string(&from)
            } else {
                Ok(String::new())
            }
            .map_err(|e| err(e.to_string()))?;
            out.write(
                &path,
                apply_diff(&base, &diff).map_err(|e| err(format!("{path}: {e}")))?.as_bytes(),
            )
            .map_err(|e| err(e.to_string()))?;
        }
        Ok(())
    }

    pub fn variant_dir(&self, name: &str) -> PathBuf {
        self.root.join("variants").join(name)
    }

    pub fn prompt(&self) -> io::Result<String> {
        self.files()?.read_to_string("prompt.md")
    }

    /// Mutants as (id, contents of the mutated target), sorted by id. A
    /// mutant is a file in `mutants/`: either a unified diff (`.diff`)
    /// against the sample's target file, applied here, or the whole
    /// mutated file.
    pub fn mutants(&self) -> io::Result<Vec<(String, Vec<u8>)>> {
        let pk = self.files()?;
        if !pk.is_dir("mutants") {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for (name, kind) in pk.entries("mutants")? {
            // `mutants/audit/` (kept from an audit, for the hidden tests
            // only) and the list of explained survivors are not mutants a
            // candidate's tests face.
            if kind != Kind::File || name == "EQUIVALENT.md" {
                continue;
            }
            let rel = format!("mutants/{name}");
            let shown = self.root.join(&rel);
            let (id, ext) = match name.rsplit_once('.') {
                Some((stem, ext)) if !stem.is_empty() => (stem.to_string(), Some(ext)),
                _ => (name.clone(), None),
            };
            let bytes = if ext == Some("diff") {
                let target =
                    self.manifest.mutation.as_ref().map(|m| m.target.clone()).ok_or_else(|| {
                        io::Error::other(format!(
                            "{}: a diff mutant needs [mutation] target",
                            shown.display()
                        ))
                    })?;
                let original = match pk.read_to_string(&format!("sample/{target}")) {
                    Ok(t) => t,
                    Err(_) => pk.read_to_string(&format!("starter/{target}"))?,
                };
                let diff = pk.read_to_string(&rel)?;
                apply_diff(&original, &diff)
                    .map_err(|e| io::Error::other(format!("{}: {e}", shown.display())))?
                    .into_bytes()
            } else {
                pk.read(&rel)?
            };
            out.push((id, bytes));
        }
        out.sort();
        Ok(out)
    }

    /// Lays `lays` from the packet into `workspace`; neither end may
    /// leave its folder or go through a link.
    pub fn lay_into(&self, lays: &[Lay], workspace: &Path) -> io::Result<()> {
        let pk = self.files()?;
        let ws = Root::open(workspace)?;
        for lay in lays {
            let (from, to) = lay.paths();
            pk.copy(&from, &ws, &to)?;
        }
        Ok(())
    }
}

/// Refuses a packet folder holding a symbolic link (or a device, socket
/// or FIFO) anywhere: packets are imported from elsewhere, and a link
/// could point the grader at any host file.
pub fn refuse_links(root: &Path) -> Result<(), PacketError> {
    for entry in walkdir::WalkDir::new(root).follow_links(false).min_depth(1) {
        let entry = entry.map_err(|e| PacketError::Layout(format!("{}: {e}", root.display())))?;
        let t = entry.file_type();
        if t.is_symlink() {
            return Err(PacketError::Layout(format!(
                "{}: a symbolic link; a packet may not contain links",
                entry.path().display()
            )));
        }
        if !t.is_dir() && !t.is_file() {
            return Err(PacketError::Layout(format!(
                "{}: not a regular file or folder",
                entry.path().display()
            )));
        }
    }
    Ok(())
}

/// Fills `template` by replacing `{{seed}}` with `seed`.
pub fn apply_seed(text: &str, seed: &str) -> String {
    text.replace("{{seed}}", seed)
}
