//! The packet linter: the classic packet mistakes, as warnings an author
//! sees in `packet check` before publishing. Pure functions of the packet's
//! files; nothing runs.
//!
//! The checks: budget and stop rule, reachable hire bars, leaked answers, test
//! commands outside the trusted runner, and packet code that could start the
//! candidate's code unconfined beside the packet's runner: plain `subprocess`
//! and `os` launches in the Python files any step or detector script lays
//! (unless marked `# gatehouse: packet-code`), and evidence-keeping steps that
//! are shell text. The packet's files are read through `Root`.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use crate::manifest::{Aggregate, Manifest};
use crate::packet::Packet;
use crate::tree::list_paths;

/// Each warning as (name, detail).
pub fn lint(packet: &Packet) -> Vec<(String, String)> {
    let m = &packet.manifest;
    let prompt = packet.prompt().unwrap_or_default();
    let mut out = Vec::new();
    out.extend(stop_rule(m, &prompt));
    out.extend(hire_bar(m));
    out.extend(leaks(packet, &prompt));
    out.extend(untrusted_commands(m));
    out.extend(unconfined_launches(packet));
    out.extend(shared_judge(m));
    out
}

/// A packet whose tests share the candidate's process (`judge =
/// "shared"`, JUDGE.md): its correctness lane rests on in-process defences
/// that code in the same address space can reach.
fn shared_judge(m: &Manifest) -> Vec<(String, String)> {
    if m.judge_apart() {
        return Vec::new();
    }
    vec![(
        "the hidden tests are judged apart".to_string(),
        format!(
            "judge = \"shared\" ({}): the hidden tests run in the candidate's process, where its code can reach the test framework, the expected values and the result channel; every scorecard and receipt of this packet says its correctness lane is weaker against forgery",
            m.packet.judge_reason.as_deref().unwrap_or("no reason given")
        ),
    )]
}

/// Calls that start a process without the harness's confining launcher:
/// (what the warning names, the pattern of the call). Each is a call, so
/// a name alone (an audit hook's event `"os.posix_spawn"`, an attribute
/// passed around) is not one.
const LAUNCHES: &[(&str, &str)] = &[
    ("subprocess.run(", r"\bsubprocess\.run\s*\("),
    ("subprocess.Popen(", r"\bsubprocess\.Popen\s*\("),
    ("subprocess.call(", r"\bsubprocess\.call\s*\("),
    ("subprocess.check_call(", r"\bsubprocess\.check_call\s*\("),
    ("subprocess.check_output(", r"\bsubprocess\.check_output\s*\("),
    ("os.system(", r"\bos\.system\s*\("),
    ("os.popen(", r"\bos\.popen\s*\("),
    ("os.execv", r"\bos\.execvp?e?\s*\("),
    ("os.execl", r"\bos\.execlp?e?\s*\("),
    ("os.spawn", r"\bos\.spawn[lv]p?e?\s*\("),
    ("os.posix_spawn", r"\bos\.posix_spawnp?\s*\("),
];

static LAUNCH_PATTERNS: std::sync::LazyLock<Vec<(&'static str, regex::Regex)>> =
    std::sync::LazyLock::new(|| {
        LAUNCHES
            .iter()
            .map(|(name, pattern)| {
                (*name, regex::Regex::new(pattern).expect("the launch patterns are valid"))
            })
            .collect()
    });

/// The comment that marks a launch of the packet's own code.
pub const PACKET_CODE_MARK: &str = "# gatehouse: packet-code";

/// A Python line's code: without its comment, and with the text of its
/// one-line string literals left out (so `"os.system("` in a string is no
/// call). Strings that span lines are not followed.
fn code_of(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in line.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                    out.push(c);
                }
            }
            None if c == '#' => break,
            None => {
                if c == '"' || c == '\'' {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
    }
    out
}

/// Lines of `text` that start a process unconfined: (line number, call).
/// A line carrying [`PACKET_CODE_MARK`] starts the packet's own code and
/// is not listed.
pub fn unconfined_launch_lines(text: &str) -> Vec<(usize, &'static str)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.contains(PACKET_CODE_MARK) {
            continue;
        }
        let code = code_of(line);
        if let Some((call, _)) = LAUNCH_PATTERNS.iter().find(|(_, re)| re.is_match(&code)) {
            out.push((n + 1, *call));
        }
    }
    out
}

/// Packet code must start the candidate's code confined (`packets/FORMAT.md`,
/// "Evidence packet code writes"), so that no unconfined candidate process
/// runs beside a packet runner: a Python file any step or detector script
/// lays that starts a process with a plain `subprocess`/`os` call is
/// listed, and a step that keeps evidence from the evidence folder whose
/// command is shell text (what it starts runs unconfined and could rewrite
/// what the step keeps).
fn unconfined_launches(packet: &Packet) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let evidence = format!("{}/", crate::sandbox::EVIDENCE_DIR);
    let pk = packet.files().ok();
    let mut runs: Vec<(String, Vec<crate::manifest::Lay>)> = Vec::new();
    for s in &packet.manifest.steps {
        // A step judged apart starts every program under the candidate's
        // uid, through the host (JUDGE.md): nothing it starts runs beside
        // the packet's runner.
        if crate::guard::judges_apart(packet, s) {
            continue;
        }
        let name = format!("step {} starts the candidate's code confined", s.id);
        if s.keep.iter().any(|k| k.starts_with(&evidence))
            && crate::trusted::plan(&s.run).runner().is_none()
        {
            out.push((name.clone(), format!("`{}` is shell text: what it starts runs unconfined and can write the evidence the step keeps; run a driver through the trusted runner (`python3 .gatehouse/driver.py`, `python3 -m pytest ...`) that starts the candidate's code with the harness (`run_confined`, `Service`)", s.run.trim())));
        }
        runs.push((name, s.lay.clone()));
    }
    for f in &packet.manifest.failures {
        f.detect.walk(&mut |d| {
            if let crate::manifest::Detector::Script { run, lay, .. } = d {
                if packet.manifest.judge_apart()
                    && crate::run::judged_apart(&crate::trusted::plan(run))
                {
                    return;
                }
                let name = format!("detector script `{run}` starts the candidate's code confined");
                if !runs.iter().any(|(n, _)| *n == name) {
                    runs.push((name, lay.clone()));
                }
            }
        });
    }
    for (name, lays) in runs {
        let mut files = BTreeSet::new();
        for lay in &lays {
            let (from, _) = lay.paths();
            if !crate::tree::is_safe_path(&from) {
                continue;
            }
            if let Some(pk) = pk.as_ref().filter(|pk| pk.is_dir(&from)) {
                files.extend(
                    pk.files(&from)
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|r| r.ends_with(".py"))
                        .map(|r| format!("{from}/{r}")),
                );
            } else if from.ends_with(".py") {
                files.insert(from);
            }
        }
        for f in files {
            let Some(Ok(text)) = pk.as_ref().map(|pk| pk.read_to_string(&f)) else { continue };
            for (line, call) in unconfined_launch_lines(&text) {
                out.push((
                    name.clone(),
                    format!("{f}:{line} starts a process with `{call}` unconfined: if it runs the candidate's code, that code runs beside the packet's runner and can rewrite its evidence; use the harness's run_confined/popen_confined/Service, or mark the line `{PACKET_CODE_MARK}` when it starts the packet's own code"),
                ));
            }
        }
    }
    out
}

/// Test commands that run as shell text rather than through the trusted
/// runner: a submission's `pytest.py` or `sitecustomize.py` could stand in
/// for the runner there, and the results come only from files the
/// candidate's code can rewrite.
fn untrusted_commands(m: &Manifest) -> Vec<(String, String)> {
    let mut commands: Vec<(String, &str)> =
        vec![("[commands] test".into(), m.commands.test.as_str())];
    if let Some(t) = &m.workspace.test {
        commands.push(("[workspace] test".into(), t.as_str()));
    }
    for s in &m.steps {
        commands.push((format!("step {}", s.id), s.run.as_str()));
    }
    if let Some(mu) = &m.mutation {
        commands.push(("[mutation] run".into(), mu.run.as_str()));
    }
    commands
        .into_iter()
        .filter(|(_, c)| (c.contains("pytest") || c.contains("unittest")) && crate::trusted::plan(c).runner().is_none())
        .map(|(what, c)| {
            (
                format!("{what} runs through the trusted runner"),
                format!("`{}` is shell text, so it runs as written: make the test command the last line (or what follows the last `&&`) in the plain form `python3 -m pytest ARGS` (packets/FORMAT.md, \"Trusted runners\")", c.trim()),
            )
        })
        .collect()
}

/// Words that state a stop rule or a budget in a prompt.
const STOP_WORDS: &[&str] = &[
    "stop", "budget", "cap ", "caps", "at most", "limit", "time box", "timebox", "give up",
    "abort", "halt", "minutes",
];

fn stop_rule(m: &Manifest, prompt: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let b = &m.budgets;
    let any_budget = [
        b.model_calls,
        b.tokens,
        b.tool_calls,
        b.wall_clock_secs,
        b.time_box_minutes,
        b.request_bytes,
    ]
    .iter()
    .any(Option::is_some);
    if !any_budget {
        out.push((
            "the packet publishes a budget".into(),
            "[budgets] sets no model calls, tokens, tool calls, wall clock or time box".into(),
        ));
    }
    let lower = prompt.to_lowercase();
    if !STOP_WORDS.iter().any(|w| lower.contains(w)) {
        out.push((
            "the prompt states a stop rule or budget".into(),
            "prompt.md never says when to stop, nor what the budget is".into(),
        ));
    }
    out
}

fn hire_bar(m: &Manifest) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if m.rubric.aggregate != Aggregate::Sum {
        return out;
    }
    let Some(top) = m.bands.first() else { return out };
    let max: u32 = m.criteria.iter().map(|c| c.max * c.weight).sum();
    if top.min > max {
        out.push((
            format!("the {:?} band can be reached", top.decision),
            format!("it needs {} but the rubric's maximum is {max}", top.min),
        ));
        return out;
    }
    for c in &m.criteria {
        let without = max - c.max * c.weight;
        if without < top.min {
            continue;
        }
        let gated = m
            .gates
            .iter()
            .any(|g| g.criterion.as_deref() == Some(c.id.as_str()) && g.min.unwrap_or(0) >= 1);
        let capped = m.caps.iter().any(|cap| {
            cap.when.len() == 1
                && cap.when[0].criterion == c.id
                && cap.when[0].at_most.is_some()
                && m.decision_rank(&cap.decision) > m.decision_rank(&top.decision)
        });
        if !gated && !capped {
            out.push((
                format!("{:?} needs criterion {}", top.decision, c.id),
                format!(
                    "{} at 0 still allows {without} of {max}, enough for {:?} (min {}); add a gate or a cap if {} matters",
                    c.id, top.decision, top.min, c.id
                ),
            ));
        }
    }
    out
}

/// The shortest line the leak check compares; shorter lines are too common.
const LEAK_MIN: usize = 24;

fn normalized_lines(text: &str) -> impl Iterator<Item = String> + '_ {
    text.lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
}

fn telling(line: &str) -> bool {
    line.len() >= LEAK_MIN
        && ![
            "import ",
            "from ",
            "#",
            "\"\"\"",
            "if __name__",
            "def test_",
            "class Test",
            "@pytest",
            "assert True",
        ]
        .iter()
        .any(|p| line.starts_with(p))
}

fn read_lines(root: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for rel in list_paths(root) {
        if let Ok(text) = fs::read_to_string(root.join(&rel)) {
            out.extend(normalized_lines(&text).map(|l| (rel.clone(), l)));
        }
    }
    out
}

/// Hidden test text in the prompt or the starter; sample-only code in the
/// prompt.
fn leaks(packet: &Packet, prompt: &str) -> Vec<(String, String)> {
    let starter: BTreeSet<String> =
        read_lines(&packet.starter_dir()).into_iter().map(|(_, l)| l).collect();
    let prompt_lines: BTreeSet<String> = normalized_lines(prompt).collect();
    let mut found = Vec::new();
    for (file, line) in read_lines(&packet.root.join("hidden")) {
        // Shared set-up between hidden and starter tests is normal; an
        // expected value (an assertion) in the starter gives the answer away.
        let in_starter = starter.contains(&line) && line.starts_with("assert ");
        if telling(&line) && (prompt_lines.contains(&line) || in_starter) {
            let place = if prompt_lines.contains(&line) { "prompt.md" } else { "the starter" };
            found.push(format!("hidden/{file}: `{line}` appears in {place}"));
        }
    }
    for (file, line) in read_lines(&packet.sample_dir()) {
        if telling(&line) && !starter.contains(&line) && prompt_lines.contains(&line) {
            found.push(format!("sample/{file}: `{line}` appears in prompt.md"));
        }
    }
    found.sort();
    found.dedup();
    if found.is_empty() {
        return Vec::new();
    }
    let n = found.len();
    found.truncate(5);
    let more = if n > 5 { format!(" (and {} more)", n - 5) } else { String::new() };
    vec![(
        "the prompt and starter do not leak the answer".into(),
        format!("{}{more}", found.join("; ")),
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(extra: &str) -> Manifest {
        let src = format!("{}{extra}", include_str!("../tests/fixtures/rubrics/lint.toml"));
        Manifest::parse("packet.toml", &src).unwrap()
    }

    fn names(w: Vec<(String, String)>) -> Vec<String> {
        w.into_iter().map(|(n, d)| format!("{n}: {d}")).collect()
    }

    #[test]
    fn stop_rule_and_budget() {
        let m = manifest("[[band]]\nmin = 0\ndecision = \"close\"\n");
        assert_eq!(names(stop_rule(&m, "Fix the bug.")).len(), 2);
        let m = manifest("[budgets]\nmodel_calls = 4\n[[band]]\nmin = 0\ndecision = \"close\"\n");
        assert_eq!(
            names(stop_rule(&m, "Fix the bug; stop after four model calls.")),
            Vec::<String>::new()
        );
    }

    #[test]
    fn unreachable_and_ungated_hire_bars() {
        let m = manifest(
            "[[band]]\nmin = 5\ndecision = \"hire\"\n[[band]]\nmin = 0\ndecision = \"no\"\n",
        );
        assert_eq!(
            names(hire_bar(&m)),
            ["\"hire\" band can be reached: it needs 5 but the rubric's maximum is 4"
                .replace("\"hire\" band", "the \"hire\" band")]
        );
        // With a bar of 2, either criterion alone reaches it.
        let m = manifest(
            "[[band]]\nmin = 2\ndecision = \"hire\"\n[[band]]\nmin = 0\ndecision = \"no\"\n",
        );
        assert_eq!(hire_bar(&m).len(), 2);
        // A gate on one and a cap on the other silence both.
        let m = manifest(
            "[[gate]]\ncriterion = \"tests\"\nmin = 1\ndecision = \"no\"\n[[cap]]\nwhen = [{ criterion = \"honesty\", at_most = 0 }]\ndecision = \"no\"\n[[band]]\nmin = 2\ndecision = \"hire\"\n[[band]]\nmin = 0\ndecision = \"no\"\n",
        );
        assert_eq!(names(hire_bar(&m)), Vec::<String>::new());
        // A bar of 4 needs both: nothing to say.
        let m = manifest(
            "[[band]]\nmin = 4\ndecision = \"hire\"\n[[band]]\nmin = 0\ndecision = \"no\"\n",
        );
        assert_eq!(names(hire_bar(&m)), Vec::<String>::new());
    }

    #[test]
    fn unconfined_launches_are_listed_and_marked_ones_are_not() {
        let text = "import subprocess\nsubprocess.run([sys.executable, 'agent.py'])\nproc = subprocess.Popen([sys.executable, str(TOY)])  # gatehouse: packet-code\nrun_confined(['python3', 'agent.py'])\n# subprocess.run( in a comment\nos.system('sh replay.sh')\nsubprocess.CompletedProcess(cmd, None)\n";
        assert_eq!(unconfined_launch_lines(text), vec![(2, "subprocess.run("), (6, "os.system(")]);
        assert!(
            unconfined_launch_lines(
                "from gatehouse_harness import Service\nService(['python3', 'app.py'], port=8080)\n"
            )
            .is_empty()
        );
        // A name in a string, as an audit hook matches events, is no call;
        // the calls of the spawn and exec families are.
        let hook = "if event in (\"os.exec\", \"os.posix_spawn\"):\n    elif event == 'os.spawn': note('subprocess.run(')\nif ev[\"event\"] == \"os.posix_spawn\" and previous == words:\n";
        assert_eq!(unconfined_launch_lines(hook), Vec::<(usize, &str)>::new());
        let calls = "pid = os.posix_spawnp('x', ['x'], {})\nos.spawnv(os.P_WAIT, exe, argv)\nos.execvpe(exe, argv, env)\nlabel = \"#\"; os.system('id')\n";
        assert_eq!(
            unconfined_launch_lines(calls),
            vec![(1, "os.posix_spawn"), (2, "os.spawn"), (3, "os.execv"), (4, "os.system(")]
        );
    }

    #[test]
    fn telling_lines() {
        assert!(telling("assert total(\"refunds.csv\") == 1300"));
        assert!(!telling("import os"));
        assert!(!telling("x = 1"));
        assert!(!telling("def test_refund_is_negative(tmp_path):"));
    }
}
