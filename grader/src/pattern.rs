//! Regular expressions and glob lists from a manifest, compiled once when
//! the manifest is read. Detectors match with the compiled values, so an
//! evaluation never compiles (and a bad pattern is a manifest error located
//! at its line, never a grading failure).
//!
//! Both serialise back to the text the author wrote, so a manifest
//! round-trips through JSON unchanged.

use std::fmt;
use std::ops::Deref;

use globset::{GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};
use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The most a manifest regex may compile to. Packet data is untrusted, so
/// a pattern cannot make the grader build an enormous automaton.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// A regular expression. With `MULTI_LINE`, `^` and `$` match at line
/// boundaries (for a pattern matched against a whole text rather than line
/// by line).
#[derive(Clone)]
pub struct Pattern<const MULTI_LINE: bool = false> {
    source: String,
    regex: Regex,
}

impl<const M: bool> Pattern<M> {
    pub fn new(source: &str) -> Result<Self, String> {
        RegexBuilder::new(source)
            .multi_line(M)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map(|regex| Pattern { source: source.to_string(), regex })
            .map_err(|e| format!("bad regex {source:?}: {e}"))
    }

    /// The text the author wrote.
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

impl<const M: bool> Deref for Pattern<M> {
    type Target = Regex;
    fn deref(&self) -> &Regex {
        &self.regex
    }
}

impl<const M: bool> fmt::Display for Pattern<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl<const M: bool> fmt::Debug for Pattern<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.source)
    }
}

impl<const M: bool> Serialize for Pattern<M> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.source)
    }
}

impl<'de, const M: bool> Deserialize<'de> for Pattern<M> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let source = String::deserialize(d)?;
        Pattern::new(&source).map_err(serde::de::Error::custom)
    }
}

/// A list of globs, matched as one set (`/` is matched only by `/`, and a
/// pattern is tried plain if it does not compile with that rule).
#[derive(Clone, Default)]
pub struct Globs {
    patterns: Vec<String>,
    set: GlobSet,
    each: Vec<GlobMatcher>,
}

impl Globs {
    pub fn new(patterns: Vec<String>) -> Result<Globs, String> {
        Globs::build(patterns, false)
    }

    /// For test-name patterns, which are names first: a pattern that is no
    /// valid glob (say `test_x[a-`) matches only itself.
    pub fn lenient<'de, D: Deserializer<'de>>(d: D) -> Result<Globs, D::Error> {
        Globs::build(Vec::<String>::deserialize(d)?, true).map_err(serde::de::Error::custom)
    }

    fn build(patterns: Vec<String>, lenient: bool) -> Result<Globs, String> {
        let mut set = GlobSetBuilder::new();
        let mut each = Vec::with_capacity(patterns.len());
        for p in &patterns {
            let glob = GlobBuilder::new(p)
                .literal_separator(true)
                .build()
                .or_else(|_| globset::Glob::new(p))
                .or_else(|e| if lenient { globset::Glob::new(&globset::escape(p)) } else { Err(e) })
                .map_err(|e| format!("bad glob {p:?}: {e}"))?;
            each.push(glob.compile_matcher());
            set.add(glob);
        }
        let set = set.build().map_err(|e| format!("bad glob list {patterns:?}: {e}"))?;
        Ok(Globs { patterns, set, each })
    }

    /// Whether any pattern matches `path`.
    pub fn is_match(&self, path: &str) -> bool {
        self.set.is_match(path)
    }

    /// Each pattern with its own matcher, in the author's order.
    pub fn each(&self) -> impl Iterator<Item = (&str, &GlobMatcher)> {
        self.patterns.iter().map(String::as_str).zip(&self.each)
    }
}

impl Deref for Globs {
    type Target = [String];
    fn deref(&self) -> &[String] {
        &self.patterns
    }
}

impl fmt::Debug for Globs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.patterns).finish()
    }
}

impl Serialize for Globs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.patterns.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Globs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Globs::new(Vec::<String>::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile_once_and_round_trip() {
        let p: Pattern = serde_json::from_str(r#""^a(b)$""#).unwrap();
        assert!(p.is_match("ab") && !p.is_match("xab"));
        assert_eq!(serde_json::to_string(&p).unwrap(), r#""^a(b)$""#);
        let m: Pattern<true> = Pattern::new("^b$").unwrap();
        assert!(m.is_match("a\nb\nc"), "multi-line: ^ and $ at line boundaries");
        assert!(!Pattern::<false>::new("^b$").unwrap().is_match("a\nb\nc"));
        let e = serde_json::from_str::<Pattern>(r#""(""#).unwrap_err().to_string();
        assert!(e.contains("bad regex \"(\""), "{e}");
        let big = serde_json::from_str::<Pattern>(r#""(\\w{100}){100}""#).unwrap_err().to_string();
        assert!(big.contains("size limit"), "{big}");
    }

    #[test]
    fn globs_match_as_a_set_and_each() {
        let g: Globs = serde_json::from_str(r#"["*.py", "tests/**"]"#).unwrap();
        assert!(g.is_match("a.py") && g.is_match("tests/x/y.txt"));
        assert!(!g.is_match("src/a.py"), "`*` does not cross `/`");
        assert_eq!(
            g.each().filter(|(_, m)| m.is_match("a.py")).map(|(p, _)| p).collect::<Vec<_>>(),
            ["*.py"]
        );
        assert_eq!(serde_json::to_string(&g).unwrap(), r#"["*.py","tests/**"]"#);
        let e = serde_json::from_str::<Globs>(r#"["a[", "b"]"#).unwrap_err().to_string();
        assert!(e.contains("bad glob \"a[\""), "{e}");
        let lenient =
            Globs::lenient(&mut serde_json::Deserializer::from_str(r#"["test_x[a-", "t_*"]"#))
                .unwrap();
        assert!(
            lenient.is_match("test_x[a-")
                && lenient.is_match("t_1")
                && !lenient.is_match("test_xa")
        );
    }
}
