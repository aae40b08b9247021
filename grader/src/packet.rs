//! A packet on disk: its manifest, its files and its digest, plus the file
//! tree operations the pipeline uses to assemble workspaces.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::manifest::{Lay, Manifest, ManifestError};
use crate::diff::{apply_diff, split_diff};
use crate::tree::{copy_path, list_files, remove_paths, safe_join, tree_digest, write_file};

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
        if !crate::tree::is_safe_relative(&m.packet.brief) || self.root.join("starter").join(&m.packet.brief).exists() {
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
