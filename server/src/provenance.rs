//! Line-level provenance of a submission: for every added or changed line
//! of its diff against the starter, whether the line (whitespace removed)
//! appears in a model answer the meter kept, and in which call.
//!
//! Answers are the text and the tool-call arguments (and the strings inside
//! arguments that are JSON, as a `write_file` tool sends code) of the
//! forwarded calls up to the submission. Trivial lines never count either
//! way (blank, brackets and punctuation alone, or fewer than
//! [`MIN_CHARS`] characters once whitespace is removed), so honest code is
//! not marked by coincidence (`return True`, `}`, `pass`).

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use crate::transcript::{Body, CallTranscript};

/// The fewest non-whitespace characters a line needs to count.
pub const MIN_CHARS: usize = 12;

/// The line with every whitespace character removed, or None when it is
/// trivial.
pub fn normalise(line: &str) -> Option<String> {
    let n: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    (n.chars().count() >= MIN_CHARS && n.chars().any(char::is_alphanumeric)).then_some(n)
}

/// The normalised lines of the model's answers, each with the first call
/// that wrote it.
#[derive(Debug, Default, Clone)]
pub struct AnswerIndex(HashMap<String, i64>);

fn strings_of(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings_of(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings_of(x, out)),
        _ => {}
    }
}

impl AnswerIndex {
    /// The index of the answers of `calls` (oldest first).
    pub fn of(calls: &[CallTranscript]) -> AnswerIndex {
        let mut index = AnswerIndex::default();
        for t in calls.iter().filter(|t| t.call.refused.is_none()) {
            let Body::Json(response) = &t.response else { continue };
            let mut texts = Vec::new();
            for m in crate::transcript::answer_messages(response) {
                texts.push(m.text);
                for c in m.tool_calls {
                    if let Ok(args) = serde_json::from_str::<Value>(&c.arguments) {
                        strings_of(&args, &mut texts);
                    }
                    texts.push(c.arguments);
                }
            }
            for line in texts.iter().flat_map(|t| t.lines()) {
                if let Some(n) = normalise(line) {
                    index.0.entry(n).or_insert(t.call.id);
                }
            }
        }
        index
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The call whose answer holds this line, if it counts.
    pub fn call_of(&self, line: &str) -> Option<i64> {
        normalise(line).and_then(|n| self.0.get(&n).copied())
    }
}

/// An added or changed line that counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LineMark {
    /// 1-based, in the submitted file.
    pub line: usize,
    pub text: String,
    /// The call whose answer holds it; None when no answer does.
    pub call: Option<i64>,
}

/// One file's provenance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileProvenance {
    pub path: String,
    /// Added or changed lines that count (trivial ones left out).
    pub changed_lines: usize,
    /// Of those, the lines found in a model answer.
    pub model_lines: usize,
    pub lines: Vec<LineMark>,
}

/// A submission's provenance, per file and in total.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Provenance {
    pub files: Vec<FileProvenance>,
    pub changed_lines: usize,
    pub model_lines: usize,
    /// `model_lines / changed_lines`, 0 when nothing counts.
    pub model_share: f64,
}

/// The added or changed lines of `new` against `old` (1-based numbers in `new`).
pub fn added_lines(old: &str, new: &str) -> Vec<(usize, String)> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(250);
    let mut out = Vec::new();
    for op in
        similar::capture_diff_slices_deadline(similar::Algorithm::Myers, &a, &b, Some(deadline))
    {
        for change in similar::DiffOp::iter_changes(&op, &a, &b) {
            if change.tag() == similar::ChangeTag::Insert
                && let Some(i) = change.new_index()
            {
                out.push((i + 1, change.value().to_string()));
            }
        }
    }
    out
}

/// One file's provenance against the index.
pub fn of_file(path: &str, old: &str, new: &str, index: &AnswerIndex) -> FileProvenance {
    let lines: Vec<LineMark> = added_lines(old, new)
        .into_iter()
        .filter(|(_, text)| normalise(text).is_some())
        .map(|(line, text)| LineMark { call: index.call_of(&text), line, text })
        .collect();
    let model_lines = lines.iter().filter(|l| l.call.is_some()).count();
    FileProvenance { path: path.to_string(), changed_lines: lines.len(), model_lines, lines }
}

impl Provenance {
    pub fn of(files: Vec<FileProvenance>) -> Provenance {
        let changed_lines = files.iter().map(|f| f.changed_lines).sum();
        let model_lines = files.iter().map(|f| f.model_lines).sum();
        let model_share =
            if changed_lines == 0 { 0.0 } else { model_lines as f64 / changed_lines as f64 };
        Provenance { files, changed_lines, model_lines, model_share }
    }

    /// "4 of 12 added or changed lines (33%) appear in a model answer".
    pub fn sentence(&self) -> String {
        format!(
            "Model-written share of the change: {} of {} added or changed line(s) ({:.0}%) appear, whitespace aside, in a model answer (blank, bracket-only and lines under {MIN_CHARS} characters are not counted).",
            self.model_lines,
            self.changed_lines,
            self.model_share * 100.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trivial_lines_never_count_and_whitespace_is_ignored() {
        for trivial in
            ["", "    ", "}", "  ) ] }", "return True", "pass", "else:", "------------------"]
        {
            assert_eq!(normalise(trivial), None, "{trivial:?}");
        }
        assert_eq!(normalise("  return field in incident "), Some("returnfieldinincident".into()));
        let old = "a = 1\n";
        let new = "a = 1\ndef total(xs: list) -> int:\n    return sum(xs)\n}\nprint('something else entirely')\n";
        let mut index = AnswerIndex::default();
        index.0.insert(normalise("def   total(xs:list)->int:").unwrap(), 7);
        let f = of_file("m.py", old, new, &index);
        // `return sum(xs)` is 12 characters: it counts, and no answer holds it.
        assert_eq!(
            f.lines.iter().map(|l| (l.line, l.call)).collect::<Vec<_>>(),
            vec![(2, Some(7)), (3, None), (5, None)]
        );
        assert_eq!((f.changed_lines, f.model_lines), (3, 1));
        let p = Provenance::of(vec![f]);
        assert!((p.model_share - 1.0 / 3.0).abs() < 1e-9);
        assert!(
            p.sentence().starts_with(
                "Model-written share of the change: 1 of 3 added or changed line(s) (33%)"
            ),
            "{}",
            p.sentence()
        );
    }
}
