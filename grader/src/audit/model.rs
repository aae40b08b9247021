//! The model's side of an audit, without any I/O: the prompt (the seed's
//! specification) and the strict reading of the answer. The server's CLI
//! (`gatehouse::audit`) makes the calls.

use super::helper::Def;

/// The prompt asking for `n` mutants of `def` (its source is cut from
/// `source`, the target file at `target`, whose language its name gives).
pub fn prompt(target: &str, source: &str, def: &Def, n: usize) -> String {
    let lines: Vec<&str> = source.lines().collect();
    let end = def.end_line.min(lines.len());
    let start = def.line.saturating_sub(1).min(end);
    let code = lines[start..end].join("\n");
    let lang = super::parser::Language::of(target).unwrap_or(super::parser::Language::Python);
    let what = match def.kind.as_str() {
        "class" | "method" => def.kind.clone(),
        "variable" | "const" | "var" => format!("{} declaration", def.kind),
        _ => "function".to_string(),
    };
    let mut title = what.clone();
    title[..1].make_ascii_uppercase();
    let imports = if lang == super::parser::Language::Python {
        ""
    } else {
        " It can use only what the file already imports."
    };
    format!(
        "Generate {n} mutant versions of this {lang} {what}. Each mutant must:\n\
         - Keep the same signature and name\n\
         - Change exactly one behavioral aspect (logic, boundary, or branch)\n\
         - Not be a compile error or a trivial cosmetic change\n\
         - Explain the intended fault in one line\n\
         \n\
         Each \"code\" is the complete replacement of `{name}` in {target}: one top-level definition, nothing before or after it.{imports}\n\
         Return only a JSON array: [{{\"code\": \"...\", \"fault\": \"...\"}}]\n\
         \n\
         {title}:\n{code}\n",
        lang = lang.name(),
        name = def.name,
    )
}

/// Reads a model's answer strictly: the whole content is a JSON array of
/// at most `asked` objects with exactly a non-empty string `code` and a
/// one-line string `fault`. Anything else is reported, never guessed at.
pub fn parse_answer(content: &str, asked: usize) -> Result<Vec<(String, String)>, String> {
    let text = content.trim();
    let start: String = text.chars().take(60).collect();
    if !text.starts_with('[') {
        return Err(format!("the answer is not a JSON array: it starts with {start:?}"));
    }
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("the answer is not valid JSON: {e}"))?;
    let items = v.as_array().ok_or("the answer is not a JSON array")?;
    if items.is_empty() {
        return Err("the answer is an empty array".into());
    }
    if items.len() > asked {
        return Err(format!("asked for {asked} mutants, the answer has {}", items.len()));
    }
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let n = i + 1;
        let obj = item.as_object().ok_or_else(|| format!("item {n} is not an object"))?;
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort();
        if keys != ["code", "fault"] {
            return Err(format!(
                "item {n} has keys [{}], not exactly code and fault",
                keys.join(", ")
            ));
        }
        let code = obj["code"].as_str().ok_or_else(|| format!("item {n}: code is not a string"))?;
        let fault =
            obj["fault"].as_str().ok_or_else(|| format!("item {n}: fault is not a string"))?;
        if code.trim().is_empty() {
            return Err(format!("item {n}: code is empty"));
        }
        let fault = fault.trim();
        if fault.is_empty() || fault.contains('\n') {
            return Err(format!("item {n}: fault must be one non-empty line"));
        }
        out.push((code.to_string(), fault.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_strictly() {
        let check =
            |content: &str, expect: Result<usize, &str>| match (parse_answer(content, 3), expect) {
                (Ok(got), Ok(n)) => assert_eq!(got.len(), n, "{content}"),
                (Err(e), Err(want)) => assert!(e.contains(want), "{content}: {e}"),
                (got, want) => panic!("{content}: got {got:?}, want {want:?}"),
            };
        check(r#"[{"code": "def f():\n    return 1\n", "fault": "returns 1"}]"#, Ok(1));
        check(
            "  \n[{\"code\": \"x\", \"fault\": \"a\"}, {\"code\": \"y\", \"fault\": \"b\"}]\n",
            Ok(2),
        );
        check(
            "Here are the mutants:\n[{\"code\": \"x\", \"fault\": \"a\"}]",
            Err("not a JSON array: it starts with \"Here"),
        );
        check("```json\n[{\"code\": \"x\", \"fault\": \"a\"}]\n```", Err("not a JSON array"));
        check("[{\"code\": \"x\", \"fault\": \"a\"}", Err("not valid JSON"));
        check("[]", Err("empty array"));
        check(
            r#"[{"code":"a","fault":"a"},{"code":"b","fault":"b"},{"code":"c","fault":"c"},{"code":"d","fault":"d"}]"#,
            Err("asked for 3 mutants, the answer has 4"),
        );
        check(r#"["def f(): pass"]"#, Err("item 1 is not an object"));
        check(r#"[{"code": "x"}]"#, Err("item 1 has keys [code]"));
        check(r#"[{"code": "x", "fault": "a", "why": "b"}]"#, Err("not exactly code and fault"));
        check(r#"[{"code": 1, "fault": "a"}]"#, Err("code is not a string"));
        check(r#"[{"code": " ", "fault": "a"}]"#, Err("code is empty"));
        check(r#"[{"code": "x", "fault": "two\nlines"}]"#, Err("one non-empty line"));
    }

    #[test]
    fn the_prompt_follows_the_specification() {
        let src = "import csv\n\ndef total(path: str) -> int:\n    return 0\n\nX = 1\n";
        let def = Def {
            name: "total".into(),
            kind: "function".into(),
            line: 3,
            end_line: 4,
            signature: "def total(path: str) -> int".into(),
        };
        let p = prompt("invoices.py", src, &def, 5);
        for part in [
            "Generate 5 mutant versions of this Python function",
            "Keep the same signature and name",
            "exactly one behavioral aspect",
            "Not be a compile error",
            "fault in one line",
            "Return only a JSON array: [{\"code\": \"...\", \"fault\": \"...\"}]",
            "Function:\ndef total(path: str) -> int:\n    return 0\n",
        ] {
            assert!(p.contains(part), "{part:?} not in:\n{p}");
        }
        assert!(!p.contains("X = 1") && !p.contains("import csv"), "{p}");
        assert!(!p.contains("already imports"), "{p}");
    }

    #[test]
    fn the_prompt_names_the_targets_language_and_kind() {
        let def = |name: &str, kind: &str, line, end_line| Def {
            name: name.into(),
            kind: kind.into(),
            line,
            end_line,
            signature: String::new(),
        };
        let go = "package ticket

const (
	maxAttempts = 3
)

func (e *FetchError) Error() string { return e.Message }
";
        let p = prompt("client.go", go, &def("FetchError.Error", "method", 7, 7), 2);
        for part in [
            "Generate 2 mutant versions of this Go method",
            "complete replacement of `FetchError.Error` in client.go",
            "It can use only what the file already imports.",
            "Method:\nfunc (e *FetchError) Error() string { return e.Message }\n",
        ] {
            assert!(p.contains(part), "{part:?} not in:\n{p}");
        }
        let p = prompt("client.go", go, &def("maxAttempts", "const", 3, 5), 1);
        assert!(
            p.contains("this Go const declaration") && p.contains("Const declaration:\nconst ("),
            "{p}"
        );
        let ts = "export class TokenBucket {\n  allow(n = 1): boolean { return true; }\n}\n";
        let p = prompt("src/bucket.ts", ts, &def("TokenBucket", "class", 1, 3), 3);
        assert!(p.contains("this TypeScript class") && p.contains("Class:\nexport class"), "{p}");
    }
}
