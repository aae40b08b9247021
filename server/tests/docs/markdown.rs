//! Markdown as GitHub renders it: pulldown-cmark with GitHub's extensions
//! (tables, footnotes, strikethrough, task lists), heading anchors by
//! GitHub's slug rules, and the parts the checks read (links, code,
//! tables), each with the line it is on.

use std::collections::{BTreeMap, BTreeSet};

use pulldown_cmark::{BrokenLink, CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};

fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
}

/// The 1-based line of byte `offset` of `text`.
pub fn line_of(text: &str, offset: usize) -> usize {
    Lines::new(text).of(offset)
}

/// Where each line of a text starts, to find the line of many offsets.
pub struct Lines(Vec<usize>);

impl Lines {
    pub fn new(text: &str) -> Lines {
        Lines(text.match_indices('\n').map(|(i, _)| i).collect())
    }

    /// The 1-based line of byte `offset`.
    pub fn of(&self, offset: usize) -> usize {
        self.0.partition_point(|&newline| newline < offset) + 1
    }
}

/// GitHub's anchor for a heading whose text is `text`: lowercased, every
/// character but letters, digits, `-`, `_` and spaces dropped, each space
/// a `-` (github-slugger, which GitHub's renderer follows).
pub fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The values of the HTML attributes `names` in `html` (`href="x"`,
/// `src='y'`) in the order they come, by a plain scan: enough for the
/// HTML a README holds.
pub fn attributes(html: &str, names: &[&str]) -> Vec<String> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let lower = html.to_ascii_lowercase();
    for name in names {
        let mut from = 0;
        while let Some(at) = lower[from..].find(&format!("{name}=")) {
            let start = from + at;
            from = start + name.len() + 1;
            let preceded = lower[..start].chars().next_back().is_none_or(char::is_whitespace);
            let rest = &html[from..];
            let Some(quote) = rest.chars().next().filter(|q| *q == '"' || *q == '\'') else {
                continue;
            };
            if let (true, Some(end)) = (preceded, rest[1..].find(quote)) {
                out.push((start, rest[1..1 + end].to_string()));
            }
        }
    }
    out.sort();
    out.into_iter().map(|(_, v)| v).collect()
}

/// The anchors a document has: each heading's slug (a repeated one
/// numbered `-1`, `-2`, ... as GitHub numbers them) and the `id` and
/// `name` attributes of its HTML.
pub fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    // github-slugger's occurrences: a slug taken gets `-1`, `-2`, ...
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(text, options()) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&heading.take().unwrap_or_default());
                let mut anchor = base.clone();
                while taken.contains_key(&anchor) {
                    let n = taken.get_mut(&base).expect("the base was taken first");
                    *n += 1;
                    anchor = format!("{base}-{n}");
                }
                taken.insert(anchor.clone(), 0);
                out.insert(anchor);
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::Html(h) | Event::InlineHtml(h) => {
                out.extend(attributes(&h, &["id", "name"]));
            }
            _ => {}
        }
    }
    out
}

/// A link or image destination and its line.
pub struct Link {
    pub dest: String,
    pub line: usize,
}

/// The destinations of every link and image (Markdown, and HTML `href`
/// and `src`), and the full or collapsed references (`[text][ref]`,
/// `[ref][]`) whose definition is missing, as (line, reference). A
/// shortcut `[text]` is left alone: it is ordinary text in most docs.
pub fn links(text: &str) -> (Vec<Link>, Vec<(usize, String)>) {
    let lines = Lines::new(text);
    let mut broken = Vec::new();
    let mut callback = |b: BrokenLink<'_>| {
        if matches!(b.link_type, LinkType::Reference | LinkType::Collapsed) {
            broken.push((lines.of(b.span.start), b.reference.to_string()));
        }
        None
    };
    let mut out = Vec::new();
    let parser = Parser::new_with_broken_link_callback(text, options(), Some(&mut callback));
    for (event, range) in parser.into_offset_iter() {
        let line = lines.of(range.start);
        match event {
            Event::Start(Tag::Link { link_type, dest_url, .. })
            | Event::Start(Tag::Image { link_type, dest_url, .. })
                if !matches!(link_type, LinkType::Autolink | LinkType::Email) =>
            {
                out.push(Link { dest: dest_url.to_string(), line });
            }
            Event::Html(h) | Event::InlineHtml(h) => {
                for dest in attributes(&h, &["href", "src"]) {
                    out.push(Link { dest, line });
                }
            }
            _ => {}
        }
    }
    (out, broken)
}

/// A code block (fenced or indented) or an inline code span.
pub struct Code {
    pub text: String,
    /// The line of its first line of code.
    pub line: usize,
    /// A fenced block's info string's first word (`toml`, `sh`).
    pub lang: String,
    pub inline: bool,
}

pub fn code(text: &str) -> Vec<Code> {
    let lines = Lines::new(text);
    let mut out = Vec::new();
    let mut block: Option<Code> = None;
    for (event, range) in Parser::new_ext(text, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(kind)) => {
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().unwrap_or_default().to_string()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                block = Some(Code { text: String::new(), line: 0, lang, inline: false });
            }
            Event::Text(t) if block.is_some() => {
                let b = block.as_mut().expect("in a block");
                if b.text.is_empty() {
                    b.line = lines.of(range.start);
                }
                b.text.push_str(&t);
            }
            Event::End(TagEnd::CodeBlock) => out.extend(block.take()),
            Event::Code(t) => out.push(Code {
                text: t.to_string(),
                line: lines.of(range.start),
                lang: String::new(),
                inline: true,
            }),
            _ => {}
        }
    }
    out
}

/// A table cell: its text, and its code spans in order.
#[derive(Default)]
pub struct Cell {
    pub text: String,
    pub code: Vec<String>,
    /// Whether the cell begins with a code span.
    pub starts_with_code: bool,
}

pub struct Table {
    pub header: Vec<Cell>,
    /// Each body row with its line.
    pub rows: Vec<(usize, Vec<Cell>)>,
}

pub fn tables(text: &str) -> Vec<Table> {
    let lines = Lines::new(text);
    let mut out = Vec::new();
    let mut table: Option<Table> = None;
    let mut row: Vec<Cell> = Vec::new();
    let mut row_line = 0;
    let mut cell: Option<Cell> = None;
    for (event, range) in Parser::new_ext(text, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::Table(_)) => {
                table = Some(Table { header: Vec::new(), rows: Vec::new() })
            }
            Event::End(TagEnd::Table) => out.extend(table.take()),
            Event::Start(Tag::TableHead) | Event::Start(Tag::TableRow) => {
                row = Vec::new();
                row_line = lines.of(range.start);
            }
            Event::End(TagEnd::TableHead) => {
                if let Some(t) = table.as_mut() {
                    t.header = std::mem::take(&mut row);
                }
            }
            Event::End(TagEnd::TableRow) => {
                if let Some(t) = table.as_mut() {
                    t.rows.push((row_line, std::mem::take(&mut row)));
                }
            }
            Event::Start(Tag::TableCell) => cell = Some(Cell::default()),
            Event::End(TagEnd::TableCell) => row.extend(cell.take()),
            Event::Code(t) => {
                if let Some(c) = cell.as_mut() {
                    if c.text.trim().is_empty() && c.code.is_empty() {
                        c.starts_with_code = true;
                    }
                    c.code.push(t.to_string());
                    c.text.push_str(&t);
                }
            }
            Event::Text(t) => {
                if let Some(c) = cell.as_mut() {
                    c.text.push_str(&t);
                }
            }
            _ => {}
        }
    }
    out
}

#[test]
fn slugs_and_anchors_follow_github() {
    let check = |heading: &str, expect: &str| assert_eq!(slug(heading), expect, "{heading:?}");
    check("Scaling out", "scaling-out");
    check("The `gatehouse` command line", "the-gatehouse-command-line");
    check("Postgres: backups & restore", "postgres-backups--restore");
    check("What the grader trusts (and why)", "what-the-grader-trusts-and-why");
    check("Transcripts — what reviewers see", "transcripts--what-reviewers-see");
    check("GATEHOUSE_* variables", "gatehouse_-variables");
    check("Ünïcode Straße", "ünïcode-straße");
    let doc = "# Setup\n## Setup\n## Setup\n<a id=\"kept\"></a>\n### `x` *y* [z](u)\n";
    let got: Vec<String> = anchors(doc).into_iter().collect();
    assert_eq!(got, ["kept", "setup", "setup-1", "setup-2", "x-y-z"]);
}

#[test]
fn html_attributes_are_read_only_as_whole_names() {
    let html = r#"<img data-src="no.png" src="docs/a.png"> <a href='b.md#x' id="top">"#;
    assert_eq!(attributes(html, &["href", "src"]), ["docs/a.png", "b.md#x"]);
    assert_eq!(attributes(html, &["id", "name"]), ["top"]);
}
