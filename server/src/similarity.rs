//! Similarity between submissions: token fingerprints with winnowing (as
//! MOSS and Dolos do). Source is tokenised with every identifier read as
//! `V`, every number as `N` and every string as `S`, comments and
//! whitespace dropped, so renamed variables, changed layout and added
//! comments do not change the fingerprints; fingerprints are kept per
//! function-sized k-gram, so reordering functions moves them but does not
//! remove them. The starter's fingerprints are taken out of every
//! submission first: code everyone was given is not a sign of copying.
//!
//! It is a reviewer's signal, never a finding: nothing here changes a score.
//! Pure: the caller reads the files.

use std::collections::{BTreeSet, HashSet};

/// Tokens per k-gram.
pub const K: usize = 12;
/// Window of the winnowing (k-grams per window).
pub const W: usize = 8;
/// Pairs at or above this similarity are shown.
pub const THRESHOLD: f64 = 0.5;

/// Keywords keep their text (they carry structure); everything else that
/// looks like a name is `V`.
const KEYWORDS: &[&str] = &[
    "def", "class", "return", "if", "elif", "else", "for", "while", "in", "not", "and", "or", "is", "None", "True", "False", "try", "except",
    "finally", "with", "as", "import", "from", "raise", "yield", "lambda", "pass", "break", "continue", "fn", "let", "mut", "match", "function",
    "const", "var", "new", "this", "self", "async", "await", "struct", "impl", "pub", "use", "null", "undefined", "switch", "case",
];

/// The normalised tokens of a source text (Python, Rust, JS-like syntax).
pub fn tokens(src: &str) -> Vec<String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '#' || (c == '/' && chars.get(i + 1) == Some(&'/')) {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            i += 2;
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == '"' || c == '\'' || c == '`' {
            let quote = c;
            let triple = chars.get(i + 1) == Some(&quote) && chars.get(i + 2) == Some(&quote);
            i += if triple { 3 } else { 1 };
            while i < chars.len() {
                if chars[i] == '\\' {
                    i += 2;
                    continue;
                }
                if chars[i] == quote && (!triple || (chars.get(i + 1) == Some(&quote) && chars.get(i + 2) == Some(&quote))) {
                    i += if triple { 3 } else { 1 };
                    break;
                }
                i += 1;
            }
            // A docstring on a line of its own is a comment.
            if !triple {
                out.push("S".to_string());
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            out.push(if KEYWORDS.contains(&word.as_str()) { word } else { "V".to_string() });
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.' || chars[i] == '_') {
                i += 1;
            }
            out.push("N".to_string());
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

fn hash(gram: &[String]) -> u64 {
    // FNV-1a: stable across runs and machines.
    let mut h: u64 = 0xcbf29ce484222325;
    for t in gram {
        for b in t.bytes().chain(std::iter::once(0)) {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    h
}

/// The winnowed fingerprints of a source text: the minimum k-gram hash of
/// every window of `W` consecutive k-grams.
pub fn fingerprints(src: &str) -> BTreeSet<u64> {
    let toks = tokens(src);
    let mut out = BTreeSet::new();
    if toks.len() < K {
        if !toks.is_empty() {
            out.insert(hash(&toks));
        }
        return out;
    }
    let hashes: Vec<u64> = toks.windows(K).map(hash).collect();
    if hashes.len() <= W {
        out.insert(*hashes.iter().min().expect("not empty"));
        return out;
    }
    for w in hashes.windows(W) {
        out.insert(*w.iter().min().expect("a full window"));
    }
    out
}

/// The fingerprints of a submission's files, less the starter's.
pub fn submission_prints<'a>(files: impl Iterator<Item = &'a str>, starter: &HashSet<u64>) -> BTreeSet<u64> {
    files.flat_map(fingerprints).filter(|h| !starter.contains(h)).collect()
}

/// How much of the smaller fingerprint set the other shares (0 to 1).
pub fn similarity(a: &BTreeSet<u64>, b: &BTreeSet<u64>) -> f64 {
    let small = a.len().min(b.len());
    if small == 0 {
        return 0.0;
    }
    a.intersection(b).count() as f64 / small as f64
}

/// The pairs (i, j, similarity) at or above [`THRESHOLD`], highest first.
pub fn similar_pairs(prints: &[BTreeSet<u64>]) -> Vec<(usize, usize, f64)> {
    let mut out = Vec::new();
    for i in 0..prints.len() {
        for j in i + 1..prints.len() {
            let s = similarity(&prints[i], &prints[j]);
            if s >= THRESHOLD {
                out.push((i, j, s));
            }
        }
    }
    out.sort_by(|a, b| b.2.total_cmp(&a.2));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const STARTER: &str = "def load(path):\n    with open(path) as f:\n        return f.read()\n";

    const ORIGINAL: &str = r#"
def parse_incident(raw):
    fields = {}
    for line in raw.splitlines():
        if ":" not in line:
            continue
        key, value = line.split(":", 1)
        fields[key.strip()] = value.strip()
    return fields

def missing(fields, wanted):
    out = []
    for name in wanted:
        if not fields.get(name):
            out.append(name)
    return out

def decide(raw):
    fields = parse_incident(raw)
    gaps = missing(fields, ["service", "owner", "status"])
    if gaps:
        return {"blocked": True, "missing": gaps}
    return {"blocked": False, "page": fields["owner"]}
"#;

    /// Renamed identifiers, reordered functions, comments and new layout.
    const DISGUISED: &str = r#"
# My own solution, honest.
def verdict(text):
    # parse first
    rec = read_incident(text)
    holes = absent(rec, ["service", "owner", "status"])
    if holes:
        return {"blocked": True,   "missing": holes}
    return {"blocked": False, "page": rec["owner"]}

def absent(rec, needed):
    res = []
    for n in needed:
        if not rec.get(n):   # a blank is a gap
            res.append(n)
    return res

def read_incident(text):
    d = {}
    for ln in text.splitlines():
        if ":" not in ln:
            continue
        k, v = ln.split(":", 1)
        d[k.strip()] = v.strip()
    return d
"#;

    /// Independent solutions of the same task.
    const INDEPENDENT: [&str; 3] = [
        r#"
import json

REQUIRED = ("service", "owner", "status")

class Incident:
    def __init__(self, data):
        self.data = data

    def blanks(self):
        return [k for k in REQUIRED if self.data.get(k) in (None, "")]

def run(blob):
    inc = Incident(json.loads(blob))
    b = inc.blanks()
    return {"blocked": bool(b), "missing": b} if b else {"blocked": False, "page": inc.data["owner"]}
"#,
        r#"
def gate(incident: dict) -> dict:
    problems = []
    if not incident.get("service"):
        problems.append("service")
    if incident.get("owner") is None:
        problems.append("owner")
    if incident.get("status") is None:
        problems.append("status")
    while problems and problems[0] == "":
        problems.pop(0)
    result = dict(blocked=len(problems) > 0)
    result["missing"] = problems
    return result
"#,
        r#"
from dataclasses import dataclass, field

@dataclass
class Record:
    field_name: str
    question: str
    tools: list = field(default_factory=list)

def records_for(incident):
    return [Record(f, "what is the " + f + "?") for f in ("service", "owner") if not incident.get(f)]

def main(incident):
    recs = records_for(incident)
    print(len(recs), "records")
    return recs
"#,
    ];

    #[test]
    fn renamed_and_reordered_copies_stay_similar_and_independent_work_does_not() {
        let starter: HashSet<u64> = fingerprints(STARTER).into_iter().collect();
        let with_starter = |s: &str| format!("{STARTER}\n{s}");
        let mut prints = vec![
            submission_prints([with_starter(ORIGINAL).as_str()].into_iter(), &starter),
            submission_prints([DISGUISED].into_iter(), &starter),
        ];
        for s in INDEPENDENT {
            prints.push(submission_prints([with_starter(s).as_str()].into_iter(), &starter));
        }
        let copy = similarity(&prints[0], &prints[1]);
        assert!(copy >= 0.7, "a disguised copy scores {copy}");
        let pairs = similar_pairs(&prints);
        // Precision over this set: every flagged pair is the real copy.
        assert_eq!(pairs.iter().map(|(i, j, _)| (*i, *j)).collect::<Vec<_>>(), [(0, 1)], "{pairs:?}");
        let mut highest = 0.0f64;
        for i in 2..prints.len() {
            for j in 0..prints.len() {
                if i != j {
                    let s = similarity(&prints[i], &prints[j]);
                    highest = highest.max(s);
                    assert!(s < THRESHOLD, "{i} vs {j}: {s}");
                }
            }
        }
        println!("disguised copy {copy:.2}; highest independent pair {highest:.2}; flagged {} pair(s), all true copies", pairs.len());
    }

    #[test]
    fn the_starter_alone_is_not_similarity() {
        let starter: HashSet<u64> = fingerprints(STARTER).into_iter().collect();
        let a = submission_prints([STARTER].into_iter(), &starter);
        let b = submission_prints([STARTER].into_iter(), &starter);
        assert!(a.is_empty() && b.is_empty());
        assert_eq!(similarity(&a, &b), 0.0);
    }

    #[test]
    fn tokens_ignore_names_layout_and_comments() {
        assert_eq!(tokens("x = foo(1)  # hi"), tokens("total=bar( 42 )"));
        assert_eq!(tokens("let a = \"s\"; // c"), tokens("let b = 'q'; /* c */"));
        assert_ne!(tokens("if a: return b"), tokens("while a: return b"));
    }
}
