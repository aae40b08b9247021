//! Settings: the docs and the configuration (`server/src/config.rs`) agree,
//! both ways.
//!
//! - Every `GATEHOUSE_*` variable the docs name is a configuration key's
//!   (`GATEHOUSE_` and the key in capitals) or one some code reads: a
//!   string literal (`"GATEHOUSE_LOG"`) or a shell expansion
//!   (`$GATEHOUSE_TEST_DATABASE`) in a file that is not Markdown.
//! - A configuration table (a Markdown table whose first column is headed
//!   "key" and another "variable") names real keys, each with its variable
//!   (none for the keys of `[oidc.<name>]` and `[model_upstreams.<slug>]`
//!   tables, which only the file sets) and, where its default cell starts
//!   with code, the default `Config::default()` has.
//! - Every key of the configuration is in such a table, once.
//! - A TOML block whose first line is `# gatehouse.toml` is read as the
//!   server reads its file, and every key in it is one the configuration
//!   has.

use std::collections::{BTreeMap, BTreeSet};

use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use gatehouse::config::Config;
use serde_json::Value;

use crate::Doc;
use crate::markdown;

/// One configuration key.
pub struct Key {
    /// The environment variable that sets it; none for keys of tables of
    /// named entries, which only the file sets.
    pub variable: Option<String>,
    /// Its default as the docs write it; none when unset or required.
    pub default: Option<String>,
}

pub struct Settings {
    /// Every key: `name`, or `table.*.name` for the keys of a table of
    /// named entries (`[oidc.<name>]`).
    pub keys: BTreeMap<String, Key>,
    /// The tables of named entries (`oidc`, `model_upstreams`).
    pub tables: BTreeSet<String>,
}

/// One entry of each table of named entries, with only its required keys,
/// so the entries' keys and defaults can be read off the configuration.
const SAMPLE: &str = r#"
[oidc.example]
discovery_url = "https://id.example/.well-known/openid-configuration"
client_id = "gatehouse"
client_secret = "secret"

[model_upstreams.example]
url = "https://llm.example/v1"
"#;

/// A `gatehouse.toml` read as `Config::load` reads the file (over the
/// defaults, unknown keys refused).
pub fn read(text: &str) -> Result<Config, String> {
    Figment::from(Serialized::defaults(Config::default()))
        .merge(Toml::string(text))
        .extract()
        .map_err(|e| e.to_string())
}

/// A default as the docs write it.
fn shown(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

impl Settings {
    pub fn of_config() -> Settings {
        let defaults = serde_json::to_value(Config::default()).expect("the defaults serialise");
        let sample = serde_json::to_value(read(SAMPLE).expect("the sample configuration reads"))
            .expect("the sample serialises");
        let given: toml_edit::DocumentMut = SAMPLE.parse().expect("the sample is TOML");
        let mut keys = BTreeMap::new();
        let mut tables = BTreeSet::new();
        for (name, value) in defaults.as_object().expect("the configuration is a table") {
            if !value.is_object() {
                let variable = Some(format!("GATEHOUSE_{}", name.to_uppercase()));
                keys.insert(name.clone(), Key { variable, default: shown(value) });
                continue;
            }
            tables.insert(name.clone());
            let entry = sample[name].get("example").and_then(Value::as_object).unwrap_or_else(|| {
                panic!(
                    "the configuration's table `{name}` has no entry `example` in SAMPLE (server/tests/docs/settings.rs): add one with its required keys, so its keys are known"
                )
            });
            for (key, value) in entry {
                let set = given[name.as_str()]["example"].get(key).is_some();
                let default = if set { None } else { shown(value) };
                keys.insert(format!("{name}.*.{key}"), Key { variable: None, default });
            }
        }
        Settings { keys, tables }
    }
}

/// The `GATEHOUSE_*` names in `text` with their byte offsets. A file's name
/// (`GATEHOUSE_PIN.toml`) is not one; a prefix (`GATEHOUSE_SMTP_*`) keeps
/// its trailing `_`; `GATEHOUSE_` alone (`GATEHOUSE_*`) is left out.
pub fn variables(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    for (start, _) in text.match_indices("GATEHOUSE_") {
        if start > 0 && word(bytes[start - 1]) {
            continue;
        }
        let mut end = start + "GATEHOUSE_".len();
        while end < bytes.len()
            && (bytes[end].is_ascii_uppercase()
                || bytes[end].is_ascii_digit()
                || bytes[end] == b'_')
        {
            end += 1;
        }
        let file = bytes.get(end) == Some(&b'.')
            && bytes.get(end + 1).is_some_and(|b| b.is_ascii_alphanumeric());
        if file
            || end < bytes.len() && bytes[end].is_ascii_lowercase()
            || end == start + "GATEHOUSE_".len()
        {
            continue;
        }
        out.push((start, text[start..end].to_string()));
    }
    out
}

/// The variables code reads: names in string literals or shell expansions
/// of the given (path, text) files.
pub fn code_variables<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, text) in files {
        for (at, name) in variables(text) {
            let before = &text[..at];
            let read = ["\"", "'", "`", "$", "${", "env."].iter().any(|p| before.ends_with(p));
            if read && !name.ends_with('_') {
                out.insert(name);
            }
        }
    }
    out
}

pub fn check_variables(docs: &[Doc], settings: &Settings, read: &BTreeSet<String>) -> Vec<String> {
    let mut known: BTreeSet<&str> = read.iter().map(String::as_str).collect();
    known.extend(settings.keys.values().filter_map(|k| k.variable.as_deref()));
    let mut out = Vec::new();
    for doc in docs {
        let lines = markdown::Lines::new(&doc.text);
        for (at, name) in variables(&doc.text) {
            let line = lines.of(at);
            if let Some(prefix) = name.strip_suffix('_') {
                if !known.iter().any(|k| k.starts_with(&name)) {
                    out.push(format!("{}:{line}: {prefix}_*: no variable starts so", doc.path));
                }
            } else if !known.contains(name.as_str()) {
                let key = name["GATEHOUSE_".len()..].to_lowercase();
                out.push(format!(
                    "{}:{line}: {name}: the configuration has no key {key} (server/src/config.rs) and no code reads {name}",
                    doc.path
                ));
            }
        }
    }
    out
}

/// `oidc.<name>.label` as the key it documents, `oidc.*.label`.
fn key_of(code: &str) -> String {
    code.split('.')
        .map(|part| if part.starts_with('<') && part.ends_with('>') { "*" } else { part })
        .collect::<Vec<_>>()
        .join(".")
}

/// The configuration tables' problems and the keys they document.
pub fn check_tables(docs: &[Doc], settings: &Settings) -> Vec<String> {
    let mut out = Vec::new();
    let mut documented: BTreeMap<String, String> = BTreeMap::new();
    for doc in docs {
        for table in markdown::tables(&doc.text) {
            let heads: Vec<String> =
                table.header.iter().map(|c| c.text.trim().to_lowercase()).collect();
            let variable = heads.iter().position(|h| h.contains("variable"));
            let default = heads.iter().position(|h| h.contains("default"));
            let (true, Some(variable)) =
                (heads.first().is_some_and(|h| h.starts_with("key")), variable)
            else {
                continue;
            };
            for (line, row) in &table.rows {
                let at = format!("{}:{line}", doc.path);
                let Some(code) = row.first().and_then(|c| c.code.first()) else {
                    out.push(format!("{at}: a configuration table's row names no key in code"));
                    continue;
                };
                let name = key_of(code);
                let Some(key) = settings.keys.get(&name) else {
                    out.push(format!(
                        "{at}: `{code}` is not a configuration key (server/src/config.rs)"
                    ));
                    continue;
                };
                if let Some(first) = documented.insert(name.clone(), at.clone()) {
                    out.push(format!("{at}: `{code}` is documented twice (first at {first})"));
                }
                let cell = row.get(variable).map(|c| c.text.trim()).unwrap_or_default();
                let named: Vec<String> = variables(cell).into_iter().map(|(_, v)| v).collect();
                match &key.variable {
                    Some(v) if named.as_slice() != [v.clone()] => out.push(format!(
                        "{at}: `{code}` is set by the variable {v}; the table says {cell:?}"
                    )),
                    None if !named.is_empty() => out.push(format!(
                        "{at}: `{code}` is read only from the file, no variable sets it; the table says {cell:?}"
                    )),
                    _ => {}
                }
                let Some(cell) = default.and_then(|d| row.get(d)).filter(|c| c.starts_with_code)
                else {
                    continue;
                };
                let said = &cell.code[0];
                match &key.default {
                    Some(d) if d == said => {}
                    Some(d) => out.push(format!(
                        "{at}: `{code}` defaults to `{d}`; the table says `{said}`"
                    )),
                    None => out.push(format!(
                        "{at}: `{code}` has no default value (unset or required); the table says `{said}`"
                    )),
                }
            }
        }
    }
    for name in settings.keys.keys() {
        if !documented.contains_key(name) {
            out.push(format!(
                "server/src/config.rs: the configuration key `{name}` is in no configuration table (a Markdown table whose columns are headed key, variable, default and meaning)"
            ));
        }
    }
    out
}

/// `# gatehouse.toml` blocks: every key one the configuration has, and the
/// whole read as the server reads its file.
pub fn check_toml(docs: &[Doc], settings: &Settings) -> Vec<String> {
    let mut out = Vec::new();
    for doc in docs {
        for code in markdown::code(&doc.text) {
            let first = code.text.lines().find(|l| !l.trim().is_empty()).unwrap_or_default();
            if code.inline || code.lang != "toml" || !first.trim().starts_with("# gatehouse.toml") {
                continue;
            }
            let at = format!("{}:{}", doc.path, code.line);
            let parsed: toml_edit::DocumentMut = match code.text.parse() {
                Ok(d) => d,
                Err(e) => {
                    out.push(format!("{at}: a gatehouse.toml block that is not TOML: {e}"));
                    continue;
                }
            };
            let before = out.len();
            for (name, item) in parsed.iter() {
                if !settings.tables.contains(name) {
                    if !settings.keys.contains_key(name) {
                        out.push(format!("{at}: the configuration has no key `{name}`"));
                    }
                    continue;
                }
                for (entry, keys) in item.as_table_like().into_iter().flat_map(|t| t.iter()) {
                    for (key, _) in keys.as_table_like().into_iter().flat_map(|t| t.iter()) {
                        if !settings.keys.contains_key(&format!("{name}.*.{key}")) {
                            out.push(format!(
                                "{at}: the configuration's [{name}.<name>] tables have no key `{key}` (in [{name}.{entry}])"
                            ));
                        }
                    }
                }
            }
            if out.len() == before
                && let Err(e) = read(&code.text)
            {
                out.push(format!("{at}: the server would not read this gatehouse.toml: {e}"));
            }
        }
    }
    out
}

#[test]
fn a_variable_nothing_reads_is_named() {
    let settings = Settings::of_config();
    let read = code_variables([
        ("server/tests/x.rs", r#"std::env::var("GATEHOUSE_FUZZ_CASES")"#),
        ("scripts/x", "echo ${GATEHOUSE_TEST_DATABASE:-sqlite} $GATEHOUSE_SCREENSHOTS"),
        (
            "grader/src/x.rs",
            "// GATEHOUSE_IN_A_COMMENT is not read\nlet p = \"GATEHOUSE_PIN.toml\";",
        ),
    ]);
    assert_eq!(
        read.iter().map(String::as_str).collect::<Vec<_>>(),
        ["GATEHOUSE_FUZZ_CASES", "GATEHOUSE_SCREENSHOTS", "GATEHOUSE_TEST_DATABASE"]
    );
    let check = |markdown: &str, expect: &[&str]| {
        let (docs, _) = crate::fixture(&[("docs/x.md", markdown)]);
        assert_eq!(check_variables(&docs, &settings, &read), expect, "{markdown}");
    };
    // Quiet: configuration keys' variables, variables code reads, a
    // prefix of real ones, file names, the family as a whole.
    check(
        "`GATEHOUSE_LISTEN=0.0.0.0:8080`, GATEHOUSE_WEBHOOK_KEEP_DAYS, `GATEHOUSE_SMTP_*`, \
         `GATEHOUSE_FUZZ_CASES=8`, `GATEHOUSE_PIN.toml`, any `GATEHOUSE_*` variable",
        &[],
    );
    check(
        "Set\n`GATEHOUSE_LISTENER` or GATEHOUSE_IN_A_COMMENT; `GATEHOUSE_NOPE_*`.",
        &[
            "docs/x.md:2: GATEHOUSE_LISTENER: the configuration has no key listener (server/src/config.rs) and no code reads GATEHOUSE_LISTENER",
            "docs/x.md:2: GATEHOUSE_IN_A_COMMENT: the configuration has no key in_a_comment (server/src/config.rs) and no code reads GATEHOUSE_IN_A_COMMENT",
            "docs/x.md:2: GATEHOUSE_NOPE_*: no variable starts so",
        ],
    );
}

/// A configuration table with a row for every key but those `skip` names,
/// each with its variable and default as the configuration has them.
fn full_table(settings: &Settings, skip: &[&str]) -> String {
    let mut out = String::from("| key | variable | default | meaning |\n|---|---|---|---|\n");
    for (name, key) in &settings.keys {
        if skip.contains(&name.as_str()) {
            continue;
        }
        let shown = name.replace(".*.", ".<name>.");
        let variable = key.variable.clone().map(|v| format!("`{v}`")).unwrap_or("file only".into());
        let default = key.default.clone().map(|d| format!("`{d}`")).unwrap_or("unset".into());
        out.push_str(&format!("| `{shown}` | {variable} | {default} | what it does |\n"));
    }
    out
}

#[test]
fn a_configuration_table_that_disagrees_with_the_configuration_is_named() {
    let settings = Settings::of_config();
    let check = |markdown: &str, expect: &[&str]| {
        let (docs, _) = crate::fixture(&[("docs/x.md", markdown)]);
        assert_eq!(check_tables(&docs, &settings), expect, "{markdown}");
    };
    let full = full_table(&settings, &[]);
    check(&full, &[]);
    // Every key, and defaults written in words are not compared.
    check(&full.replace("| `256` |", "| 256 MiB |"), &[]);
    // A key missing is named, with where the keys are.
    check(
        &full_table(&settings, &["sweep_secs"]),
        &[
            "server/src/config.rs: the configuration key `sweep_secs` is in no configuration table (a Markdown table whose columns are headed key, variable, default and meaning)",
        ],
    );
    let mut bad = full.clone();
    bad.push_str("| `lease_seconds` | `GATEHOUSE_LEASE_SECONDS` | `60` | no such key |\n");
    bad = bad.replace(
        "| `workers` | `GATEHOUSE_WORKERS` | `1` |",
        "| `workers` | `GATEHOUSE_WORKER_COUNT` | `2` |",
    );
    bad = bad.replace(
        "| `oidc.<name>.label` | file only |",
        "| `oidc.<name>.label` | `GATEHOUSE_OIDC_LABEL` |",
    );
    let n = full.lines().count();
    let row =
        |key: &str| full.lines().position(|l| l.contains(&format!("| `{key}` |"))).unwrap() + 1;
    check(
        &bad,
        &[
            format!("docs/x.md:{}: `oidc.<name>.label` is read only from the file, no variable sets it; the table says \"GATEHOUSE_OIDC_LABEL\"", row("oidc.<name>.label")).as_str(),
            format!("docs/x.md:{}: `workers` is set by the variable GATEHOUSE_WORKERS; the table says \"GATEHOUSE_WORKER_COUNT\"", row("workers")).as_str(),
            format!("docs/x.md:{}: `workers` defaults to `1`; the table says `2`", row("workers")).as_str(),
            format!("docs/x.md:{}: `lease_seconds` is not a configuration key (server/src/config.rs)", n + 1).as_str(),
        ],
    );
    // Twice, and a default that the configuration does not have.
    let mut twice = full.clone();
    twice.push_str("| `smtp_host` | `GATEHOUSE_SMTP_HOST` | `localhost` | again |\n");
    check(
        &twice,
        &[
            format!("docs/x.md:{}: `smtp_host` is documented twice (first at docs/x.md:{})", n + 1, row("smtp_host")).as_str(),
            format!("docs/x.md:{}: `smtp_host` has no default value (unset or required); the table says `localhost`", n + 1).as_str(),
        ],
    );
}

#[test]
fn a_gatehouse_toml_block_the_server_would_not_read_is_named() {
    let settings = Settings::of_config();
    let check = |markdown: &str, expect: &[&str]| {
        let (docs, _) = crate::fixture(&[("docs/x.md", markdown)]);
        assert_eq!(check_toml(&docs, &settings), expect, "{markdown}");
    };
    let block = |body: &str| format!("Text.\n\n```toml\n# gatehouse.toml\n{body}```\n");
    check(
        &block(
            "listen = \"0.0.0.0:8080\"\n[oidc.acme]\ndiscovery_url = \"https://a.example/.well-known/openid-configuration\"\nclient_id = \"x\"\nclient_secret = \"y\"\nallowed_domains = [\"acme.com\"]\n",
        ),
        &[],
    );
    // Another TOML block (a packet.toml) is not the configuration.
    check("```toml\n[packet]\nslug = \"x\"\n```\n", &[]);
    check(
        &block("listen_on = \"0.0.0.0:8080\"\n"),
        &["docs/x.md:4: the configuration has no key `listen_on`"],
    );
    check(
        &block("[model_upstreams.x]\nurl = \"https://a.example/v1\"\ntoken = \"k\"\n"),
        &[
            "docs/x.md:4: the configuration's [model_upstreams.<name>] tables have no key `token` (in [model_upstreams.x])",
        ],
    );
    let wrong_type =
        check_toml(&crate::fixture(&[("docs/x.md", &block("workers = \"two\"\n"))]).0, &settings);
    assert!(
        wrong_type.len() == 1
            && wrong_type[0]
                .starts_with("docs/x.md:4: the server would not read this gatehouse.toml: ")
            && wrong_type[0].contains("workers"),
        "{wrong_type:?}"
    );
}

#[test]
fn the_repository_settings_are_the_configuration_s() {
    let repo = crate::repo();
    let settings = Settings::of_config();
    let mut problems = check_variables(&repo.docs, &settings, &repo.variables_read);
    problems.extend(check_tables(&repo.docs, &settings));
    problems.extend(check_toml(&repo.docs, &settings));
    assert!(
        problems.is_empty(),
        "settings the docs and the configuration disagree on:\n{}",
        problems.join("\n")
    );
    assert!(settings.keys.len() > 50 && settings.tables.len() == 2, "{:?}", settings.keys.keys());
    assert!(repo.variables_read.contains("GATEHOUSE_LOG"), "{:?}", repo.variables_read);
}
