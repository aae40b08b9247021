//! Manifest errors, each problem located at the line of the value it is about.

use std::fmt;

/// What is wrong with a manifest: every problem found, each located in its
/// file where it has a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    pub file: String,
    /// At least one, in the order of the checks.
    pub problems: Vec<Problem>,
}

/// One manifest problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line, when the problem has one.
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            match p.line {
                Some(line) => write!(f, "{}:{}: {}", self.file, line, p.message)?,
                None => write!(f, "{}: {}", self.file, p.message)?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for ManifestError {}

pub(super) fn quoted(s: &str) -> String {
    format!("{s:?}")
}

pub(super) fn line_of(src: &str, offset: usize) -> usize {
    src[..offset.min(src.len())].bytes().filter(|b| *b == b'\n').count() + 1
}

/// The line of the first occurrence of `needle` in `src`.
pub(super) fn locate(src: &str, needle: &str) -> Option<usize> {
    src.find(needle).map(|o| line_of(src, o))
}

/// One step of a key path into the manifest: a table key or an array index
/// (`[[step]]` tables are an array).
#[derive(Clone, Copy)]
pub(super) enum Key<'a> {
    Name(&'a str),
    Index(usize),
}

impl<'a> From<&'a str> for Key<'a> {
    fn from(k: &'a str) -> Self {
        Key::Name(k)
    }
}

impl<'a> From<&'a String> for Key<'a> {
    fn from(k: &'a String) -> Self {
        Key::Name(k)
    }
}

impl From<usize> for Key<'_> {
    fn from(i: usize) -> Self {
        Key::Index(i)
    }
}

/// The problems validation finds, each located by the key path of the value
/// it is about (from toml's spanned parse of the same source), so a
/// duplicate id points at the duplicate, not at the first use.
pub(super) struct Problems<'a> {
    src: &'a str,
    doc: Option<toml::Spanned<toml::de::DeTable<'a>>>,
    list: Vec<Problem>,
}

impl<'a> Problems<'a> {
    pub(super) fn new(src: &'a str) -> Self {
        Problems { src, doc: toml::de::DeTable::parse(src).ok(), list: Vec::new() }
    }

    /// The line of the value at `path`, or of the deepest part of it that
    /// exists; none when not even its first key does.
    pub(super) fn line(&self, path: &[Key]) -> Option<usize> {
        use toml::de::DeValue;
        let doc = self.doc.as_ref()?;
        let mut table = Some(doc.get_ref());
        let mut array = None;
        let mut found = None;
        for key in path {
            let child = match (key, table, array) {
                (Key::Name(n), Some(t), _) => {
                    t.iter().find(|(k, _)| k.get_ref().as_ref() == *n).map(|(_, v)| v)
                }
                (Key::Index(i), _, Some(a)) => <[_]>::get(a, *i),
                _ => None,
            };
            let Some(child) = child else { break };
            found = Some(child.span().start);
            (table, array) = match child.get_ref() {
                DeValue::Table(t) => (Some(t), None),
                DeValue::Array(a) => (None, Some(&a[..])),
                _ => (None, None),
            };
        }
        found.map(|o| line_of(self.src, o))
    }

    pub(super) fn at(&mut self, path: &[Key], message: String) {
        let line = self.line(path);
        self.list.push(Problem { line, message });
    }

    /// A problem located at the first occurrence of `needle` (for values
    /// that are unique in practice, such as a path).
    pub(super) fn near(&mut self, needle: &str, message: String) {
        let line = locate(self.src, needle);
        self.list.push(Problem { line, message });
    }

    pub(super) fn finish(self, file: &str) -> Result<(), ManifestError> {
        if self.list.is_empty() {
            Ok(())
        } else {
            Err(ManifestError { file: file.to_string(), problems: self.list })
        }
    }
}
