//! Command lines: every `gatehouse` command in a code block (and every
//! inline code span that starts with `gatehouse `) names subcommands the
//! CLI has, flags those subcommands take, and, where a flag takes one of a
//! fixed set of values, one of them. The CLI is clap's own command tree
//! (`gatehouse::cli::command`), so the docs are compared with what the
//! binary parses, not with a copy.
//!
//! A command starts a line or follows `&&`, `||`, `;` or `|`, after any
//! `NAME=value` assignments and `sudo`, `exec`, `env`, `nohup`, `time` or
//! `nice -n N`; `target/release/gatehouse` counts. A line ending in `\`
//! continues, and so does an indented line that starts with an option
//! (`[--step ID]...`) under a `gatehouse` line (a synopsis). Placeholders
//! (`<PACKET_DIR>`, `N`, `$DEST`) and optional brackets are read as such.

use crate::Doc;
use crate::markdown;

pub fn check(docs: &[Doc], cli: &clap::Command) -> Vec<String> {
    let mut out = Vec::new();
    for doc in docs {
        for code in markdown::code(&doc.text) {
            if code.inline {
                if code.text.starts_with("gatehouse ") {
                    for why in invocation(cli, &tokens(&code.text)) {
                        out.push(format!("{}:{}: `{}`: {why}", doc.path, code.line, code.text));
                    }
                }
                continue;
            }
            for (line, text) in logical_lines(&code.text) {
                for command in commands(&text) {
                    for why in invocation(cli, &command) {
                        out.push(format!(
                            "{}:{}: `{}`: {why}",
                            doc.path,
                            code.line + line,
                            command.join(" ")
                        ));
                    }
                }
            }
        }
    }
    out
}

/// The lines of a block with continuations joined, each with its offset
/// from the block's first line.
fn logical_lines(block: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open = false; // the last line ended with `\`
    for (i, line) in block.lines().enumerate() {
        let synopsis = line.starts_with(char::is_whitespace)
            && line.trim_start().starts_with(['-', '['])
            && out.last().is_some_and(|(_, l)| commands(l).iter().any(|c| !c.is_empty()));
        let text = line.trim_end();
        let (text, continues) = match text.strip_suffix('\\') {
            Some(t) => (t, true),
            None => (text, false),
        };
        match out.last_mut() {
            Some((_, last)) if open || synopsis => {
                last.push(' ');
                last.push_str(text.trim());
            }
            _ => out.push((i, text.to_string())),
        }
        open = continues;
    }
    out
}

fn tokens(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

/// The arguments of each `gatehouse` command on a line (comments cut).
fn commands(line: &str) -> Vec<Vec<String>> {
    let line = line.trim_start().strip_prefix("$ ").unwrap_or(line.trim_start());
    let mut words: Vec<&str> = Vec::new();
    for word in line.split_whitespace() {
        if word.starts_with('#') {
            break;
        }
        words.push(word);
    }
    let mut out = Vec::new();
    for part in words.split(|w| ["&&", "||", ";", "|"].contains(w)) {
        let mut rest = part;
        loop {
            match rest.first() {
                Some(w) if w.contains('=') && !w.starts_with('-') && !w.starts_with('=') => {
                    rest = &rest[1..]
                }
                Some(&("sudo" | "exec" | "env" | "nohup" | "time")) => rest = &rest[1..],
                Some(&"nice") => {
                    rest = &rest[1..];
                    if rest.first() == Some(&"-n") {
                        rest = &rest[rest.len().min(2)..];
                    }
                }
                _ => break,
            }
        }
        if let Some(first) = rest.first()
            && first.rsplit('/').next() == Some("gatehouse")
        {
            out.push(
                std::iter::once("gatehouse")
                    .chain(rest[1..].iter().copied())
                    .map(str::to_string)
                    .collect(),
            );
        }
    }
    out
}

/// Whether a word stands for a value rather than being one: `<DIR>`,
/// `N`, `FILE.zip`, `$DEST`, `...`.
fn placeholder(word: &str) -> bool {
    word.starts_with(['<', '$', '{', '.', '"', '\''])
        || word.chars().any(|c| c.is_ascii_uppercase())
        || word.is_empty()
}

/// What is wrong with `gatehouse ARGS` (`words[0]` is `gatehouse`).
fn invocation(cli: &clap::Command, words: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut command = cli;
    let mut path = vec![cli.get_name().to_string()];
    let mut positionals = 0;
    let mut i = 1;
    while i < words.len() {
        let word = words[i].trim_start_matches(['[', '(']).trim_end_matches([']', ')', ',']);
        let word = word.strip_suffix("...").unwrap_or(word);
        let word = word.trim_end_matches([']', ')']);
        i += 1;
        if word == "--" {
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let arg = command.get_arguments().find(|a| {
                a.get_long() == Some(name)
                    || a.get_all_aliases().is_some_and(|all| all.contains(&name))
            });
            let Some(arg) = arg else {
                let known: Vec<String> = command
                    .get_arguments()
                    .filter_map(|a| a.get_long())
                    .map(|l| format!("--{l}"))
                    .collect();
                out.push(format!(
                    "{} has no option --{name} (it has {})",
                    path.join(" "),
                    known.join(", ")
                ));
                continue;
            };
            if arg.get_action().takes_values() {
                let value = match inline {
                    Some(v) => Some(v.to_string()),
                    None if i < words.len() => {
                        i += 1;
                        Some(words[i - 1].trim_end_matches([']', ')']).to_string())
                    }
                    None => None,
                };
                let possible = arg.get_possible_values();
                if let Some(value) = value
                    && !possible.is_empty()
                {
                    for v in value.split('|').filter(|v| !placeholder(v)) {
                        if !possible.iter().any(|p| p.matches(v, false)) {
                            let names: Vec<&str> = possible.iter().map(|p| p.get_name()).collect();
                            out.push(format!(
                                "{} --{name} takes {}, not {v}",
                                path.join(" "),
                                names.join(", ")
                            ));
                        }
                    }
                }
            }
        } else if word.starts_with('-')
            && word.len() > 1
            && !word[1..].starts_with(char::is_numeric)
        {
            for short in word[1..].chars() {
                if !command.get_arguments().any(|a| a.get_short() == Some(short)) {
                    out.push(format!("{} has no option -{short}", path.join(" ")));
                }
            }
        } else if command.has_subcommands() && positionals == 0 {
            if placeholder(word) {
                break;
            }
            match command.find_subcommand(word) {
                Some(sub) => {
                    command = sub;
                    path.push(sub.get_name().to_string());
                }
                None => {
                    let known: Vec<&str> = command
                        .get_subcommands()
                        .map(clap::Command::get_name)
                        .filter(|n| *n != "help")
                        .collect();
                    out.push(format!(
                        "{} has no subcommand {word} (it has {})",
                        path.join(" "),
                        known.join(", ")
                    ));
                    break;
                }
            }
        } else {
            positionals += 1;
        }
    }
    out
}

#[test]
fn a_command_line_the_cli_does_not_parse_is_named() {
    let cli = crate::cli();
    let check = |markdown: &str, expect: &[&str]| {
        let (docs, _) = crate::fixture(&[("docs/x.md", markdown)]);
        assert_eq!(check(&docs, &cli), expect, "{markdown}");
    };
    // Quiet: real commands, with assignments before them, a path to the
    // binary, placeholders, a synopsis over several lines, `=` values,
    // comments, and words that only look like the binary.
    check(
        "```\nGATEHOUSE_PASSWORD=... gatehouse user add --role admin --email you@example.com\n\
         target/release/gatehouse serve --config /etc/gatehouse.toml   # the server\n\
         gatehouse grade <PACKET_DIR> <SUBMISSION.zip> [--format text|json]\n\
         gatehouse packet audit <PACKET_DIR> [--target FILE] [--function NAME]...\n\
         \x20                      [--step ID]... [--format=json] [--save ID]...\n\
         gatehouse worker \\\n    --count 4\n\
         createdb gatehouse && gatehouse backup /backups/x\n\
         # gatehouse.toml\n```\n\
         Run `gatehouse packet check packets/refund-invoices`; `gatehouse.toml` is read.\n",
        &[],
    );
    // Fires: an unknown subcommand (where it is, with what exists), an
    // unknown option of the subcommand it follows, a value outside a
    // fixed set, a misspelt option on a continued line and inline.
    check(
        "intro\n\n```sh\ngatehouse serve\ngatehouse packet chek packets/x\n```\n",
        &[
            "docs/x.md:5: `gatehouse packet chek packets/x`: gatehouse packet has no subcommand chek (it has starter, audit, check)",
        ],
    );
    check(
        "```\nnice -n 5 gatehouse grade p s.zip --formt json\n```\n",
        &[
            "docs/x.md:2: `gatehouse grade p s.zip --formt json`: gatehouse grade has no option --formt (it has --format, --max-entries, --max-entry-mb, --max-total-mb, --max-ratio, --max-nesting, --help)",
        ],
    );
    check(
        "```\ngatehouse user add --role owner --email a@b.example\n```\n",
        &[
            "docs/x.md:2: `gatehouse user add --role owner --email a@b.example`: gatehouse user add --role takes admin, author, reviewer, not owner",
        ],
    );
    check(
        "```\ngatehouse worker \\\n  --workers 4\n```\n",
        &[
            "docs/x.md:2: `gatehouse worker --workers 4`: gatehouse worker has no option --workers (it has --config, --count, --help)",
        ],
    );
    check(
        "Then `gatehouse restore --from /backups/x`.",
        &[
            "docs/x.md:1: `gatehouse restore --from /backups/x`: gatehouse restore has no option --from (it has --config, --help)",
        ],
    );
}

#[test]
fn the_repository_commands_are_the_cli_s() {
    let repo = crate::repo();
    let cli = crate::cli();
    let problems = check(&repo.docs, &cli);
    assert!(problems.is_empty(), "command lines the CLI does not parse:\n{}", problems.join("\n"));
    let seen: usize = repo
        .docs
        .iter()
        .flat_map(|d| markdown::code(&d.text))
        .filter(|c| !c.inline)
        .flat_map(|c| logical_lines(&c.text))
        .map(|(_, l)| commands(&l).len())
        .sum();
    assert!(seen >= 10, "only {seen} gatehouse command lines were read");
}
