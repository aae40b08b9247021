//! Links: every relative link and image (Markdown or HTML) names a file or
//! folder of the repository, and every `#anchor` one of the target's
//! headings (GitHub's slugs) or HTML ids; a link to another kind of file
//! may only name lines (`#L10`, `#L10-L20`). Links with a scheme
//! (`https:`, `mailto:`) are the web's, not checked here. A full
//! reference (`[text][ref]`) needs its definition.

use std::collections::{BTreeMap, BTreeSet};

use crate::markdown;
use crate::{Doc, Files};

pub fn check(docs: &[Doc], files: &Files) -> Vec<String> {
    let anchors: BTreeMap<&str, BTreeSet<String>> =
        docs.iter().map(|d| (d.path.as_str(), markdown::anchors(&d.text))).collect();
    let mut out = Vec::new();
    for doc in docs {
        let (links, broken) = markdown::links(&doc.text);
        for (line, reference) in broken {
            out.push(format!(
                "{}:{line}: link reference [{reference}] has no definition ([{reference}]: ...)",
                doc.path
            ));
        }
        for link in links {
            if let Err(why) = resolve(&doc.path, &link.dest, files, &anchors) {
                out.push(format!("{}:{}: link {}: {why}", doc.path, link.line, link.dest));
            }
        }
    }
    out
}

/// Whether `dest` has a scheme (`https:`, `mailto:`) or is protocol-relative.
fn external(dest: &str) -> bool {
    if dest.starts_with("//") {
        return true;
    }
    let scheme: String =
        dest.chars().take_while(|c| c.is_ascii_alphanumeric() || "+.-".contains(*c)).collect();
    !scheme.is_empty()
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && dest[scheme.len()..].starts_with(':')
}

/// `%20` and the like, as a browser decodes a link's path.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) =
                (bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The repository path `dest` names from the document at `from`.
fn target(from: &str, dest: &str) -> Result<String, String> {
    let mut parts: Vec<&str> = Vec::new();
    if !dest.starts_with('/') {
        parts.extend(from.split('/').filter(|p| !p.is_empty()));
        parts.pop(); // the document's own name
    }
    for part in dest.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err("leaves the repository (a code host cannot show it)".into());
                }
            }
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

fn resolve(
    from: &str,
    dest: &str,
    files: &Files,
    anchors: &BTreeMap<&str, BTreeSet<String>>,
) -> Result<(), String> {
    if external(dest) {
        return Ok(());
    }
    let (path, fragment) = match dest.split_once('#') {
        Some((p, f)) => (p, Some(percent_decode(f))),
        None => (dest, None),
    };
    let path = percent_decode(path.split('?').next().unwrap_or_default());
    let target = if path.is_empty() { from.to_string() } else { target(from, &path)? };
    let is_file = files.files.contains(&target);
    if !is_file && !files.dirs.contains(&target) {
        return Err("no such file or folder in the repository".into());
    }
    let Some(fragment) = fragment.filter(|f| !f.is_empty()) else { return Ok(()) };
    if !is_file {
        return Err(format!("{target} is a folder, which has no anchor #{fragment}"));
    }
    match anchors.get(target.as_str()) {
        Some(known) if known.contains(&fragment) => Ok(()),
        Some(known) => {
            let near: Vec<&str> = known
                .iter()
                .filter(|a| {
                    let word = fragment.split('-').next().unwrap_or_default();
                    !word.is_empty() && a.contains(word)
                })
                .map(String::as_str)
                .take(5)
                .collect();
            let hint = if near.is_empty() {
                String::new()
            } else {
                format!(
                    " (it has {})",
                    near.iter().map(|a| format!("#{a}")).collect::<Vec<_>>().join(", ")
                )
            };
            Err(format!("{target} has no heading or id whose anchor is #{fragment}{hint}"))
        }
        None if line_anchor(&fragment) => Ok(()),
        None => Err(format!(
            "{target} is not Markdown: an anchor into it can only name lines (#L10, #L10-L20), not #{fragment}"
        )),
    }
}

/// `L10`, `L10-L20`, `L10C2-L11C4`: the line anchors a code host shows.
fn line_anchor(f: &str) -> bool {
    let one = |s: &str| {
        let Some(rest) = s.strip_prefix('L') else { return false };
        let (line, col) = rest.split_once('C').unwrap_or((rest, "1"));
        [line, col].iter().all(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    };
    match f.split_once('-') {
        Some((a, b)) => one(a) && one(b),
        None => one(f),
    }
}

#[test]
fn a_link_or_anchor_that_does_not_resolve_is_named() {
    let check = |docs: &[(&str, &str)], expect: &[&str]| {
        let (docs, files) = crate::fixture(docs);
        assert_eq!(check(&docs, &files), expect, "{docs:?}");
    };
    let ops = ("docs/operating.md", "# Operating\n## Scaling out\n## Backups\n## Backups\n");
    let code = ("server/src/config.rs", "");
    // Quiet: files, folders, anchors (repeated headings numbered), the
    // same document, line anchors into code, links with a scheme.
    check(
        &[
            ("README.md", "[a](docs/operating.md) [b](docs/) [c](docs/operating.md#scaling-out)"),
            ops,
            code,
        ],
        &[],
    );
    check(
        &[
            (
                "docs/x.md",
                "# Top\n[a](#top) [b](operating.md#backups-1) [c](../server/src/config.rs#L10-L20) \
                 [d](/README.md) [e](https://example.com/x#y) [f](mailto:a@b.example) <https://x.example>",
            ),
            ("README.md", "hi"),
            ops,
            code,
        ],
        &[],
    );
    // Fires: a missing file, a missing anchor (with the near ones), a
    // link out of the repository, an anchor into a folder or into code,
    // an image and HTML, a reference without its definition.
    check(
        &[("README.md", "intro\n\nsee [ops](docs/operatin.md)"), ops],
        &["README.md:3: link docs/operatin.md: no such file or folder in the repository"],
    );
    check(
        &[("README.md", "[s](docs/operating.md#scaling)"), ops],
        &[
            "README.md:1: link docs/operating.md#scaling: docs/operating.md has no heading or id whose anchor is #scaling (it has #scaling-out)",
        ],
    );
    check(
        &[("docs/x.md", "[p](../../shared/PACKETS.md)")],
        &[
            "docs/x.md:1: link ../../shared/PACKETS.md: leaves the repository (a code host cannot show it)",
        ],
    );
    check(
        &[("README.md", "[d](docs/#top) [c](server/src/config.rs#listen)"), ops, code],
        &[
            "README.md:1: link docs/#top: docs is a folder, which has no anchor #top",
            "README.md:1: link server/src/config.rs#listen: server/src/config.rs is not Markdown: an anchor into it can only name lines (#L10, #L10-L20), not #listen",
        ],
    );
    check(
        &[
            ("README.md", "![shot](docs/shot.png)\n\n<p><img src=\"docs/gone.png\"></p>\n"),
            ("docs/shot.png", ""),
        ],
        &["README.md:3: link docs/gone.png: no such file or folder in the repository"],
    );
    check(
        &[("README.md", "# Top\n[here][nowhere] and [fine][top]\n\n[top]: #top\n")],
        &["README.md:2: link reference [nowhere] has no definition ([nowhere]: ...)"],
    );
}

#[test]
fn the_repository_links_resolve() {
    let repo = crate::repo();
    let problems = check(&repo.docs, &repo.files);
    assert!(problems.is_empty(), "links that do not resolve:\n{}", problems.join("\n"));
    let links: usize = repo.docs.iter().map(|d| markdown::links(&d.text).0.len()).sum();
    assert!(links > 100, "only {links} links were read: is the repository there?");
}
