//! `mutants/EQUIVALENT.md`: the survivors of an audit that no hidden test
//! should kill, each with why. A survivor is either a hole in the hidden
//! tests (strengthen them and keep the mutant, [`super::save`]) or a change
//! no behaviour the brief asks for can tell apart (an equivalent mutant, or
//! one of behaviour the brief leaves open): those are listed here.
//!
//! The file is Markdown, for review. Each entry is a `## ` heading (a title
//! for people), the reason in prose, and one fenced ```` ```diff ```` block:
//! the mutant as a unified diff of one sample file (the audit's diff). A
//! survivor is explained when the file it mutates, patched by an entry's
//! diff, is exactly the survivor's mutated file: the entry names the change
//! itself, not an audit id that another audit would number differently, and
//! an entry whose diff no longer applies to the sample explains nothing
//! (`packet check` fails on it, so a stale list is seen).

use std::path::PathBuf;

use super::classify::Outcome;
use super::{AuditReport, MutantReport};
use crate::diff::{apply_diff, split_diff};
use crate::packet::Packet;

/// The list's path in a packet.
pub const FILE: &str = "mutants/EQUIVALENT.md";

/// One entry of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    pub title: String,
    /// Why no hidden test should kill it (prose, whitespace collapsed).
    pub reason: String,
    /// The sample file the diff mutates.
    pub file: String,
    /// A single-file unified diff against the sample's `file`.
    pub diff: String,
    /// The line of the entry's heading.
    pub line: usize,
}

/// Parses the list; an error names the line and what is wrong.
pub fn parse(text: &str) -> Result<Vec<Explanation>, String> {
    struct Open {
        title: String,
        line: usize,
        prose: Vec<String>,
        diffs: Vec<(usize, String)>,
    }
    let at = |line: usize, msg: String| format!("{FILE}:{line}: {msg}");
    let mut out = Vec::new();
    let mut entry: Option<Open> = None;
    // The fence being read: its opening line, whether it is a diff, its text.
    let mut fence: Option<(usize, bool, String)> = None;
    let finish = |e: Open| -> Result<Explanation, String> {
        let title = &e.title;
        let reason = e.prose.join(" ").split_whitespace().collect::<Vec<_>>().join(" ");
        if reason.is_empty() {
            return Err(at(e.line, format!("entry {title:?} gives no reason")));
        }
        let (line, diff) = match e.diffs.as_slice() {
            [one] => one.clone(),
            [] => return Err(at(e.line, format!("entry {title:?} has no ```diff block"))),
            _ => {
                return Err(at(
                    e.line,
                    format!(
                        "entry {title:?} has {} ```diff blocks; an entry explains one mutant",
                        e.diffs.len()
                    ),
                ));
            }
        };
        let parts = split_diff(&diff).map_err(|m| at(line, format!("entry {title:?}: {m}")))?;
        let [(file, _)] = parts.as_slice() else {
            return Err(at(
                line,
                format!(
                    "entry {title:?}: the diff names {} files; an entry explains a mutant of one file",
                    parts.len()
                ),
            ));
        };
        Ok(Explanation { title: e.title, reason, file: file.clone(), diff, line: e.line })
    };
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        if let Some((start, is_diff, body)) = &mut fence {
            if raw.trim_end() == "```" {
                let (start, is_diff, body) = (*start, *is_diff, std::mem::take(body));
                fence = None;
                if is_diff {
                    match &mut entry {
                        Some(e) => e.diffs.push((start, body)),
                        None => {
                            return Err(at(
                                start,
                                "a ```diff block outside any `## ` entry".into(),
                            ));
                        }
                    }
                }
            } else {
                body.push_str(raw);
                body.push('\n');
            }
            continue;
        }
        if let Some(info) = raw.trim_start().strip_prefix("```") {
            fence = Some((n, info.trim() == "diff", String::new()));
        } else if let Some(title) = raw.strip_prefix("## ") {
            if let Some(e) = entry.take() {
                out.push(finish(e)?);
            }
            let title = title.trim().to_string();
            if title.is_empty() {
                return Err(at(n, "an entry heading with no title".into()));
            }
            entry = Some(Open { title, line: n, prose: Vec::new(), diffs: Vec::new() });
        } else if let Some(e) = &mut entry {
            e.prose.push(raw.to_string());
        }
    }
    if let Some((start, _, _)) = fence {
        return Err(at(start, "a ``` block that is never closed".into()));
    }
    if let Some(e) = entry.take() {
        out.push(finish(e)?);
    }
    Ok(out)
}

/// The packet's list (empty when it has none).
pub fn load(packet: &Packet) -> Result<Vec<Explanation>, String> {
    let pk = packet.files().map_err(|e| format!("{}: {e}", packet.root.display()))?;
    if !pk.is_file(FILE) {
        return Ok(Vec::new());
    }
    let text = pk.read_to_string(FILE).map_err(|e| format!("{FILE}: {e}"))?;
    parse(&text)
}

/// The entry that explains the mutant turning `source` (the sample's
/// `file`) into `mutated`.
pub fn find<'e>(
    list: &'e [Explanation],
    file: &str,
    source: &str,
    mutated: &str,
) -> Option<&'e Explanation> {
    list.iter().find(|e| e.file == file && apply_diff(source, &e.diff).is_ok_and(|m| m == mutated))
}

/// Marks each survivor of `mutants` (mutating `file`, whose sample copy is
/// `source`) that an entry explains: outcome `explained`, the entry's
/// reason as the reason.
pub fn mark(mutants: &mut [MutantReport], list: &[Explanation], file: &str, source: &str) {
    for m in mutants.iter_mut().filter(|m| m.outcome == Outcome::Survived) {
        let Ok(mutated) = apply_diff(source, &m.diff) else { continue };
        if let Some(e) = find(list, file, source, &mutated) {
            m.outcome = Outcome::Explained;
            m.reason = format!("explained in {FILE} ({}): {}", e.title, e.reason);
        }
    }
}

/// The sample's copy of `file` (the starter's when the sample has none).
pub fn sample_source(packet: &Packet, file: &str) -> Option<String> {
    let pk = packet.files().ok()?;
    pk.read_to_string(&format!("sample/{file}"))
        .or_else(|_| pk.read_to_string(&format!("starter/{file}")))
        .ok()
}

/// What is wrong with the entries of `list` against the packet's sample:
/// a diff that no longer applies, or that changes nothing.
pub fn stale(packet: &Packet, list: &[Explanation]) -> Vec<String> {
    list.iter()
        .filter_map(|e| {
            let why = match sample_source(packet, &e.file) {
                None => format!("the sample has no {}", e.file),
                Some(src) => match apply_diff(&src, &e.diff) {
                    Err(m) => format!("its diff no longer applies to the sample's {}: {m}", e.file),
                    Ok(m) if m == src => format!("its diff changes nothing in {}", e.file),
                    Ok(_) => return None,
                },
            };
            Some(format!(
                "{FILE}:{}: entry {:?}: {why}; audit again and update the list",
                e.line, e.title
            ))
        })
        .collect()
}

/// The text of one entry.
pub fn entry(title: &str, reason: &str, diff: &str) -> String {
    let diff = if diff.ends_with('\n') { diff.to_string() } else { format!("{diff}\n") };
    format!("## {title}\n\n{}\n\n```diff\n{diff}```\n", reason.trim())
}

/// Records survivor `id` of `report` (`source`: the sample's target) in the
/// packet's list with `reason`, and reads the list back to check the entry
/// explains that mutant. Refuses an unknown id, a mutant that did not
/// survive, an empty reason and a mutant already explained.
pub fn record(
    packet: &Packet,
    report: &AuditReport,
    id: &str,
    reason: &str,
    source: &str,
) -> Result<PathBuf, String> {
    let m = report.mutants.iter().find(|m| m.id == id).ok_or_else(|| {
        let ids: Vec<&str> = report.mutants.iter().map(|m| m.id.as_str()).collect();
        format!("--explain {id:?}: the audit has no mutant of that id (it has {})", ids.join(", "))
    })?;
    match m.outcome {
        Outcome::Survived => {}
        Outcome::Explained => {
            return Err(format!("--explain {id:?}: already {}", m.reason));
        }
        other => {
            return Err(format!(
                "--explain {id:?}: only a survivor needs explaining; this one is {}",
                other.word()
            ));
        }
    }
    if reason.trim().is_empty() {
        return Err(format!("--explain {id:?}: give the reason after `=` (--explain ID=REASON)"));
    }
    if reason.lines().any(|l| l.starts_with("## ") || l.trim_start().starts_with("```")) {
        return Err(format!(
            "--explain {id:?}: the reason is prose (no `## ` heading, no ``` fence)"
        ));
    }
    let mutated = apply_diff(source, &m.diff).map_err(|e| {
        format!(
            "--explain {id:?}: the mutant's diff does not apply to the sample's {}: {e}",
            report.target
        )
    })?;
    let path = packet.root.join(FILE);
    let old = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        format!(
            "# Equivalent or irrelevant mutants of {}\n\nSurvivors of `gatehouse packet audit` that no hidden test should kill, each\nwith why (`packets/FORMAT.md`, `mutants/EQUIVALENT.md`).\n",
            packet.manifest.packet.slug
        )
    });
    let title = format!("{}: {}", report.target, m.fault);
    let new = format!(
        "{}\n{}",
        old.trim_end_matches('\n').to_string() + "\n",
        entry(&title, reason, &m.diff)
    );
    let list = parse(&new)?;
    if find(&list, &report.target, source, &mutated).is_none() {
        return Err(format!(
            "--explain {id:?}: the entry would not read back as this mutant; nothing was written"
        ));
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(&path, new).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "def f(x):\n    if x > 3:\n        return 3\n    return x\n";
    const DIFF: &str = "--- a/m.py\n+++ b/m.py\n@@ -1,4 +1,4 @@\n def f(x):\n-    if x > 3:\n+    if x >= 3:\n         return 3\n     return x\n";

    fn list(entries: &str) -> String {
        format!("# Equivalent mutants\n\nIntro text, ignored.\n\n{entries}")
    }

    #[test]
    fn entries_parse_and_explain_exactly_their_mutant() {
        let text = list(&entry("m.py: `>` became `>=`", "At 3 both branches\nreturn 3.", DIFF));
        let got = parse(&text).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].file, "m.py");
        assert_eq!(got[0].reason, "At 3 both branches return 3.");
        assert_eq!(got[0].line, 5);
        let mutated = apply_diff(SOURCE, DIFF).unwrap();
        assert!(find(&got, "m.py", SOURCE, &mutated).is_some());
        // Another file, or another change, is not explained.
        assert!(find(&got, "n.py", SOURCE, &mutated).is_none());
        assert!(find(&got, "m.py", SOURCE, &mutated.replace(">=", "<")).is_none());
        // Marking: only survivors whose mutated file matches.
        let mutant = |id: &str, outcome, diff: &str| MutantReport {
            id: id.into(),
            fault: String::new(),
            outcome,
            reason: "all pass".into(),
            diff: diff.into(),
            killed_by: Vec::new(),
        };
        let mut ms = vec![
            mutant("a", Outcome::Survived, DIFF),
            mutant("b", Outcome::Killed, DIFF),
            mutant("c", Outcome::Survived, &DIFF.replace("x >= 3", "x < 3")),
        ];
        mark(&mut ms, &got, "m.py", SOURCE);
        assert_eq!(ms[0].outcome, Outcome::Explained);
        assert!(ms[0].reason.contains("At 3 both branches return 3."), "{}", ms[0].reason);
        assert_eq!(ms[1].outcome, Outcome::Killed);
        assert_eq!(ms[2].outcome, Outcome::Survived);
    }

    #[test]
    fn a_malformed_list_names_the_line() {
        let check = |text: &str, want: &str| {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{e}");
        };
        check(
            &list("## t\n\n```diff\n" /* unclosed */),
            "mutants/EQUIVALENT.md:7: a ``` block that is never closed",
        );
        check(
            &list(&format!("## t\n\n```diff\n{DIFF}```\n")),
            "mutants/EQUIVALENT.md:5: entry \"t\" gives no reason",
        );
        check(&list("## t\n\nwhy\n"), "entry \"t\" has no ```diff block");
        check(
            &list(&format!("## t\n\nwhy\n\n```diff\n{DIFF}```\n\n```diff\n{DIFF}```\n")),
            "has 2 ```diff blocks",
        );
        check(
            &list("## t\n\nwhy\n\n```diff\nnot a diff\n```\n"),
            "mutants/EQUIVALENT.md:9: entry \"t\": line 1: `not a diff` is not part of a unified diff",
        );
        check(&list(&format!("```diff\n{DIFF}```\n")), "outside any `## ` entry");
        check(&list("## \n"), "an entry heading with no title");
        // Other fences (a shell example) are prose, not diffs; an empty list is fine.
        assert_eq!(
            parse(&list(&format!("## t\n\nwhy\n\n```sh\nls\n```\n\n```diff\n{DIFF}```\n")))
                .unwrap()
                .len(),
            1
        );
        assert_eq!(parse("# nothing yet\n").unwrap(), Vec::new());
    }
}
