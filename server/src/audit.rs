//! `gatehouse packet audit`: the command line of the grader's mutation audit
//! (`grader::audit`), and its model side: the calls to the packet's
//! configured upstream (OpenAI format), capped in calls and tokens, each
//! one a row of the audit's author ledger (`calls`), with usage counted as
//! the candidates' meter counts it (the answer's `usage`, else estimated).
//!
//! `run_job` is the `audit` job behind "Audit the hidden tests" on a version's
//! page: it audits a copy of the version's folder on a blocking thread (model
//! calls through `AppState::model_client`, each ledger row written to
//! `packet_audit_calls` as it finishes) and stores the report in
//! `packet_audits`. Keeping a mutant from the page is a draft edit
//! (`library::DraftEdit::KeepMutant`, through `grader::audit::save`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use grader::audit::{Audit, AuditReport, MutantReport, Outcome, Proposal};
use grader::grade::Grader;
use grader::packet::Packet;

/// The key for the upstream, when the configuration gives none.
pub const KEY_VAR: &str = "GATEHOUSE_AUDIT_API_KEY";

#[derive(clap::Args)]
pub struct AuditArgs {
    /// The packet folder (a draft or a built-in packet).
    pub packet: PathBuf,
    /// The workspace file to mutate (default: `[mutation] target`, else the
    /// sample file the hidden tests import).
    #[arg(long)]
    pub target: Option<String>,
    /// Mutate only this top-level function or class (repeatable).
    #[arg(long = "function")]
    pub functions: Vec<String>,
    /// Mutants per function: asked of the model (default 5), or rule
    /// mutants kept, evenly spread (default 8; 0 keeps all).
    #[arg(long)]
    pub mutants: Option<usize>,
    /// Mutants from a fixed grammar instead of a model (offline).
    #[arg(long)]
    pub rules: bool,
    /// The hidden-test steps that judge a mutant (repeatable; default:
    /// `[mutation] hidden_step`, else every step laying a hidden test).
    #[arg(long = "step")]
    pub steps: Vec<String>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Keep a killed or survived mutant as `mutants/audit/<ID>.diff` of the
    /// packet, so `packet check` requires the hidden tests to kill it.
    #[arg(long = "save", value_name = "ID")]
    pub save: Vec<String>,
    /// Record a survivor no hidden test should kill (an equivalent mutant,
    /// or behaviour the brief leaves open) in the packet's
    /// `mutants/EQUIVALENT.md`, with the reason: `--explain ID=REASON`.
    #[arg(long = "explain", value_name = "ID=REASON")]
    pub explain: Vec<String>,
    /// The model upstream's OpenAI-compatible base URL (default: the
    /// configured `model_upstreams.<slug>`, else `model_upstream_url`).
    #[arg(long)]
    pub upstream: Option<String>,
    /// The model name sent upstream.
    #[arg(long, default_value = "default")]
    pub model: String,
    /// Most model calls of this audit.
    #[arg(long, default_value_t = 8)]
    pub max_calls: usize,
    /// Most tokens (prompt and completion) of this audit.
    #[arg(long, default_value_t = 60_000)]
    pub max_tokens: i64,
    /// How long one model call may take, in seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout_secs: u64,
    /// Configuration file, for the upstream (default: $GATEHOUSE_CONFIG or ./gatehouse.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// Where and how the audit calls a model.
#[derive(Debug, Clone)]
pub struct ModelSettings {
    /// Base URL; `/chat/completions` is appended.
    pub url: String,
    pub key: Option<String>,
    pub model: String,
    pub max_calls: usize,
    pub max_tokens: i64,
    pub timeout: Duration,
}

/// The author ledger of one audit and what it has spent.
#[derive(Debug, Default)]
pub struct Ledger {
    pub calls: Vec<Value>,
    pub tokens: i64,
}

/// The outcome of an author-ledger row whose request was sent and whose
/// answer is not in yet; a row still so when its job fails is marked
/// [`INTERRUPTED`].
pub const IN_FLIGHT: &str = "in-flight";

/// The outcome of a call whose worker stopped before it was answered.
pub const INTERRUPTED: &str = "interrupted";

/// Why a call gave no usable content.
enum CallError {
    /// The audit's cap refused it; no request was sent.
    Refused(String),
    /// The upstream failed or could not be reached.
    Upstream(String),
    /// The upstream answered, but not with an assistant message.
    Malformed(String),
}

/// Tokens of one answer: its `usage`, else estimated as the meter does
/// (about four characters a token, rounded up).
fn usage(answer: Option<&Value>, prompt: &str, content: &str) -> (i64, i64, bool) {
    let estimate = |t: &str| (t.chars().count() as i64 + 3) / 4;
    match answer.and_then(|a| a.get("usage")).and_then(|u| {
        Some((
            u.get("prompt_tokens")?.as_i64()?,
            u.get("completion_tokens").and_then(Value::as_i64).unwrap_or(0),
        ))
    }) {
        Some((p, c)) => (p, c, false),
        None => (estimate(prompt), estimate(content), true),
    }
}

/// One call through the upstream, recorded in `ledger` whatever happens
/// (and handed to `sink` as in flight before its request is sent).
async fn call(
    client: &reqwest::Client,
    s: &ModelSettings,
    ledger: &mut Ledger,
    function: &str,
    prompt: &str,
    sink: Option<CallSink<'_>>,
) -> Result<String, CallError> {
    let n = ledger.calls.len() + 1;
    let mut row =
        json!({ "n": n, "function": function, "model": s.model, "started_ms": crate::now_ms() });
    let result = send(client, s, ledger, &mut row, prompt, sink).await;
    row["ended_ms"] = json!(crate::now_ms());
    ledger.calls.push(row);
    result
}

/// The body of [`call`]: fills `row` and returns the content or why not.
async fn send(
    client: &reqwest::Client,
    s: &ModelSettings,
    ledger: &mut Ledger,
    row: &mut Value,
    prompt: &str,
    sink: Option<CallSink<'_>>,
) -> Result<String, CallError> {
    let refuse = |row: &mut Value, why: String| {
        row["outcome"] = json!("refused");
        row["error"] = json!(why);
        CallError::Refused(why)
    };
    if ledger.calls.iter().filter(|c| c["outcome"] != "refused").count() >= s.max_calls {
        let e = refuse(row, format!("the audit's cap of {} model calls is reached", s.max_calls));
        return Err(e);
    }
    let remaining = s.max_tokens - ledger.tokens;
    let prompt_estimate = (prompt.chars().count() as i64 + 3) / 4;
    if remaining <= prompt_estimate {
        let e = refuse(
            row,
            format!(
                "the audit's cap of {} tokens leaves {remaining}, not enough for this prompt (about {prompt_estimate})",
                s.max_tokens
            ),
        );
        return Err(e);
    }
    let body = json!({
        "model": s.model,
        "messages": [{ "role": "user", "content": prompt }],
        "temperature": 0,
        "max_tokens": (remaining - prompt_estimate).min(4096),
    });
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    row["request_bytes"] = json!(bytes.len());
    let url = format!("{}/chat/completions", s.url.trim_end_matches('/'));
    let mut req =
        client.post(&url).header("content-type", "application/json").timeout(s.timeout).body(bytes);
    if let Some(k) = &s.key {
        req = req.bearer_auth(k);
    }
    // The row is written before the request leaves: a worker that dies
    // while the upstream works leaves it in flight, and the job's failure
    // marks it interrupted (the upstream may have charged for it).
    if let Some(sink) = sink {
        let mut in_flight = row.clone();
        in_flight["outcome"] = json!(IN_FLIGHT);
        in_flight["prompt_tokens"] = json!(prompt_estimate);
        in_flight["tokens_estimated"] = json!(true);
        in_flight["ended_ms"] = in_flight["started_ms"].clone();
        sink(in_flight).await;
    }
    let answer = match req.send().await {
        Ok(r) => {
            let status = r.status();
            let text = r.bytes().await;
            (status, text)
        }
        Err(e) => {
            let why = if e.is_timeout() {
                format!("the upstream {url} did not answer within {} s", s.timeout.as_secs())
            } else {
                format!("the upstream {url} could not be reached: {e}")
            };
            row["outcome"] = json!("unreachable");
            row["error"] = json!(why);
            return Err(CallError::Upstream(why));
        }
    };
    let (status, text) = answer;
    row["status"] = json!(status.as_u16());
    let text = match text {
        Ok(t) => t,
        Err(e) => {
            let why = format!("reading the upstream's answer: {e}");
            row["outcome"] = json!("unreachable");
            row["error"] = json!(why);
            return Err(CallError::Upstream(why));
        }
    };
    row["response_bytes"] = json!(text.len());
    if !status.is_success() {
        let why = format!(
            "the upstream answered {status}: {}",
            String::from_utf8_lossy(&text).chars().take(200).collect::<String>()
        );
        row["outcome"] = json!("upstream-error");
        row["error"] = json!(why);
        return Err(CallError::Upstream(why));
    }
    let answer: Option<Value> = serde_json::from_slice(&text).ok();
    let content = answer.as_ref().and_then(|v| {
        v.pointer("/choices/0/message/content").and_then(Value::as_str).map(str::to_string)
    });
    let (prompt_tokens, completion_tokens, estimated) =
        usage(answer.as_ref(), prompt, content.as_deref().unwrap_or_default());
    row["prompt_tokens"] = json!(prompt_tokens);
    row["completion_tokens"] = json!(completion_tokens);
    row["tokens_estimated"] = json!(estimated);
    ledger.tokens += prompt_tokens.max(0) + completion_tokens.max(0);
    match content {
        Some(c) => {
            row["outcome"] = json!("answered");
            Ok(c)
        }
        None => {
            let why = "the upstream's answer has no choices[0].message.content".to_string();
            row["outcome"] = json!("malformed");
            row["error"] = json!(why);
            Err(CallError::Malformed(why))
        }
    }
}

/// Where an audit's finished ledger rows go as they happen (the server
/// writes each to the author ledger in the database).
pub type CallSink<'a> =
    &'a (dyn Fn(Value) -> futures_util::future::BoxFuture<'static, ()> + Send + Sync);

/// Asks the model for `n` mutants of each selected definition, one call
/// each, within the caps, through `client`. Returns the proposals, the
/// ledger and the problems (a malformed answer is reported, never guessed
/// at; an upstream failure or a cap stops the calls). Each ledger row is
/// handed to `sink`, when given, once the call and the reading of its
/// answer are over.
pub async fn model_proposals(
    audit: &Audit<'_>,
    client: &reqwest::Client,
    s: &ModelSettings,
    functions: &[String],
    n: usize,
    sink: Option<CallSink<'_>>,
) -> anyhow::Result<(Vec<Proposal>, Ledger, Vec<String>)> {
    let mut ledger = Ledger::default();
    let mut proposals = Vec::new();
    let mut errors = Vec::new();
    let mut sent = 0;
    for def in audit.select(functions)? {
        let prompt = grader::audit::model::prompt(&audit.target, &audit.source, def, n);
        let outcome = call(client, s, &mut ledger, &def.name, &prompt, sink).await;
        let stop = match outcome {
            Ok(content) => {
                match grader::audit::model::parse_answer(&content, n) {
                    Ok(items) => {
                        for (k, (code, fault)) in items.into_iter().enumerate() {
                            proposals.push(Proposal {
                                id: format!("model-{}-{}", def.name, k + 1),
                                code,
                                fault,
                            });
                        }
                    }
                    Err(e) => {
                        if let Some(row) = ledger.calls.last_mut() {
                            row["outcome"] = json!("malformed");
                            row["error"] = json!(e);
                        }
                        errors
                            .push(format!("the model's answer for {} is malformed: {e}", def.name));
                    }
                }
                false
            }
            Err(CallError::Malformed(e)) => {
                errors.push(format!("the model's answer for {} is malformed: {e}", def.name));
                false
            }
            Err(CallError::Refused(e) | CallError::Upstream(e)) => {
                errors.push(format!("no mutants for {}: {e}", def.name));
                true
            }
        };
        if let Some(sink) = sink {
            for row in &ledger.calls[sent..] {
                sink(row.clone()).await;
            }
        }
        sent = ledger.calls.len();
        if stop {
            break;
        }
    }
    Ok((proposals, ledger, errors))
}

/// The upstream for `slug`: `--upstream`, else the configuration's.
fn settings(args: &AuditArgs, slug: &str) -> anyhow::Result<ModelSettings> {
    let (url, config_key) = match &args.upstream {
        Some(u) => (u.clone(), None),
        None => {
            let config = crate::config::Config::load(args.config.as_deref())
                .context("loading the configuration for the model upstream")?;
            config.model_upstream(slug).ok_or_else(|| {
                anyhow::anyhow!("no model upstream for {slug}: pass --upstream URL, configure model_upstreams.{slug} or model_upstream_url, or audit offline with --rules")
            })?
        }
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        anyhow::bail!(
            "--upstream {url:?}: the model upstream must be an http:// or https:// base URL such as http://127.0.0.1:9999/v1"
        );
    }
    let key = std::env::var(KEY_VAR).ok().filter(|k| !k.is_empty()).or(config_key);
    Ok(ModelSettings {
        url,
        key,
        model: args.model.clone(),
        max_calls: args.max_calls,
        max_tokens: args.max_tokens,
        timeout: Duration::from_secs(args.timeout_secs),
    })
}

/// Runs `gatehouse packet audit`. Exit 0 when the audit ran (whatever the
/// verdicts), 1 when it could not run, no model call gave mutants, or a
/// `--save` failed.
pub fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let packet = Packet::load(&args.packet)?;
    let slug = packet.manifest.packet.slug.clone();
    let model = if args.rules { None } else { Some(settings(&args, &slug)?) };
    let grader = Grader::for_host()?;
    let audit = Audit::prepare(&grader, &packet, args.target.as_deref(), &args.steps)?;
    let (proposals, calls, errors, mode) = match &model {
        None => (
            audit.rule_proposals(&args.functions, args.mutants.unwrap_or(8))?,
            Vec::new(),
            Vec::new(),
            "rules",
        ),
        Some(s) => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?;
            let client = reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .build()
                .context("building the upstream client")?;
            let (p, ledger, errors) = rt.block_on(model_proposals(
                &audit,
                &client,
                s,
                &args.functions,
                args.mutants.unwrap_or(5).max(1),
                None,
            ))?;
            (p, ledger.calls, errors, "model")
        }
    };
    let mutants = audit.judge(&proposals)?;
    let report = audit.report(mode, mutants, calls, errors);
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Text => print!("{}", text(&report)),
    }
    let mut ok = !(model.is_some() && report.mutants.is_empty());
    for id in &args.save {
        match grader::audit::save::save(&packet, &report, id, &audit.source) {
            Ok(path) => eprintln!(
                "gatehouse: kept mutant {id} as {}; `packet check` now requires the hidden tests to kill it",
                path.display()
            ),
            Err(e) => {
                eprintln!("gatehouse: {e}");
                ok = false;
            }
        }
    }
    for arg in &args.explain {
        let (id, reason) = arg.split_once('=').unwrap_or((arg.as_str(), ""));
        match grader::audit::explain::record(&packet, &report, id, reason, &audit.source) {
            Ok(path) => eprintln!(
                "gatehouse: explained mutant {id} in {}; audits show it as explained",
                path.display()
            ),
            Err(e) => {
                eprintln!("gatehouse: {e}");
                ok = false;
            }
        }
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn indent(s: &str, by: &str) -> String {
    s.lines().map(|l| format!("{by}{l}\n")).collect()
}

/// The audit for people: one block per mutant, then the counts and calls.
pub fn text(r: &AuditReport) -> String {
    let mut out = format!(
        "audit of {}: {} ({}; hidden steps: {})\n",
        r.packet,
        r.target,
        r.mode,
        r.steps.join(", ")
    );
    for m in &r.mutants {
        let MutantReport { id, fault, outcome, reason, diff, killed_by } = m;
        out.push_str(&format!("\n{:<8} {id}: {fault}\n         {reason}\n", outcome.word()));
        if !killed_by.is_empty() {
            let shown: Vec<&str> = killed_by.iter().take(5).map(String::as_str).collect();
            let more = if killed_by.len() > 5 {
                format!(" and {} more", killed_by.len() - 5)
            } else {
                String::new()
            };
            out.push_str(&format!("         killed by: {}{more}\n", shown.join(", ")));
        }
        if *outcome != Outcome::Invalid && !diff.is_empty() {
            out.push_str(&indent(diff, "         "));
        }
    }
    let c = r.counts;
    out.push_str(&format!(
        "\ncounts: {} killed, {} survived, {} explained, {} crashed, {} invalid\n",
        c.killed, c.survived, c.explained, c.crashed, c.invalid
    ));
    if !r.calls.is_empty() {
        let tokens: i64 = r
            .calls
            .iter()
            .map(|c| {
                c["prompt_tokens"].as_i64().unwrap_or(0)
                    + c["completion_tokens"].as_i64().unwrap_or(0)
            })
            .sum();
        out.push_str(&format!("model calls: {} ({tokens} tokens)\n", r.calls.len()));
    }
    for e in &r.errors {
        out.push_str(&format!("error: {e}\n"));
    }
    for w in &r.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    out
}

/// The model settings of a web audit of `slug`: the configured upstream
/// (`model_upstreams.<slug>`, else the global one) and the audit's caps.
pub fn web_settings(
    config: &crate::config::Config,
    slug: &str,
    model: &str,
    max_calls: usize,
    max_tokens: i64,
) -> Option<ModelSettings> {
    let (url, key) = config.model_upstream(slug)?;
    Some(ModelSettings {
        url,
        key,
        model: model.to_string(),
        max_calls,
        max_tokens,
        timeout: Duration::from_secs(config.model_timeout_secs.max(1)),
    })
}

/// A ledger row of the report as a row of the author ledger.
fn ledger_row(a: &crate::db::PacketAudit, row: &Value) -> crate::db::AuditCall {
    let int = |k: &str| row[k].as_i64().unwrap_or(0);
    crate::db::AuditCall {
        audit_id: a.id,
        version_id: a.version_id,
        author_id: a.requested_by,
        n: int("n"),
        function: row["function"].as_str().unwrap_or_default().to_string(),
        model: row["model"].as_str().unwrap_or_default().to_string(),
        outcome: row["outcome"].as_str().unwrap_or("unknown").to_string(),
        status: row["status"].as_i64(),
        prompt_tokens: int("prompt_tokens"),
        completion_tokens: int("completion_tokens"),
        tokens_estimated: row["tokens_estimated"].as_bool().unwrap_or(false),
        request_bytes: int("request_bytes"),
        response_bytes: int("response_bytes"),
        started_at: int("started_ms"),
        ended_at: int("ended_ms"),
        error: row["error"].as_str().map(str::to_string),
    }
}

/// Runs the `audit` job of packet audit `audit_id`: audits a copy of the
/// version's folder (an edit of the draft meanwhile does not disturb it),
/// with rule mutants or the configured model's, writes every model call to
/// the author ledger as it finishes, and stores the report with the
/// version. An audit that cannot run (the sample is not green, no
/// upstream, ...) is stored as failed with the reason; `Err` is the
/// machinery's.
pub async fn run_job(state: &crate::state::AppState, audit_id: i64) -> anyhow::Result<()> {
    let a = state
        .db
        .packet_audit(audit_id)
        .await?
        .with_context(|| format!("packet audit {audit_id} does not exist"))?;
    let version = state
        .db
        .version_by_id(a.version_id)
        .await?
        .with_context(|| format!("packet version {} does not exist", a.version_id))?;
    state.db.start_packet_audit(a.id).await?;
    state.db.clear_audit_calls(a.id).await?;
    let model = match a.mode.as_str() {
        "model" => match web_settings(
            &state.config,
            &version.slug,
            &a.model,
            usize::try_from(a.max_calls).unwrap_or(0),
            a.max_tokens,
        ) {
            Some(s) => Some(s),
            None => {
                let why = format!(
                    "no model upstream is configured for {} (model_upstreams.{} or model_upstream_url); audit with rules instead",
                    version.slug, version.slug
                );
                state.db.fail_packet_audit(a.id, &why).await?;
                return Ok(());
            }
        },
        _ => None,
    };
    let base = state.config.data_dir.join("tmp");
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    let work = grader::workdir::WorkDir::new_in(&base, "gatehouse-audit-")
        .with_context(|| format!("creating a scratch folder in {}", base.display()))?;
    let copy = work.path().join(&version.slug);
    let from = crate::library::version_path(state, &version).await?;
    let to = copy.clone();
    tokio::task::spawn_blocking(move || grader::tree::copy_path(&from, &to))
        .await?
        .context("copying the packet version for its audit")?;

    let functions: Vec<String> = a.functions.split_whitespace().map(str::to_string).collect();
    let per_function = usize::try_from(a.mutants).unwrap_or(1);
    let grader = state.grader.clone();
    let client = state.model_client.clone();
    let handle = tokio::runtime::Handle::current();
    let db = state.db.clone();
    let row_of = a.clone();
    let ran = tokio::task::spawn_blocking(move || -> Result<AuditReport, String> {
        let packet = Packet::load(&copy).map_err(|e| crate::library::describe_packet_error(&e, &copy))?;
        let audit = Audit::prepare(&grader, &packet, None, &[]).map_err(|e| e.to_string())?;
        let (proposals, calls, errors, mode) = match &model {
            None => (audit.rule_proposals(&functions, per_function).map_err(|e| e.to_string())?, Vec::new(), Vec::new(), "rules"),
            Some(s) => {
                let sink = move |row: Value| -> futures_util::future::BoxFuture<'static, ()> {
                    let (db, call) = (db.clone(), ledger_row(&row_of, &row));
                    Box::pin(async move {
                        if let Err(e) = db.record_audit_call(&call).await {
                            tracing::error!(audit = call.audit_id, error = %e, "recording an audit's model call failed");
                        }
                    })
                };
                let (p, ledger, errors) = handle.block_on(model_proposals(&audit, &client, s, &functions, per_function.max(1), Some(&sink))).map_err(|e| e.to_string())?;
                (p, ledger.calls, errors, "model")
            }
        };
        let mutants = audit.judge(&proposals).map_err(|e| e.to_string())?;
        Ok(audit.report(mode, mutants, calls, errors))
    })
    .await?;
    match ran {
        Ok(report) => {
            let c = report.counts;
            let counts = crate::db::AuditCounts {
                killed: c.killed as i64,
                survived: c.survived as i64,
                crashed: c.crashed as i64,
                invalid: c.invalid as i64,
            };
            state.db.finish_packet_audit(a.id, &serde_json::to_string(&report)?, counts).await?;
            state
                .db
                .audit(
                    "system",
                    "packet.audit",
                    &format!("packet:{}", version.slug),
                    &format!(
                        "audit {} of version id {}: {} killed, {} survived, {} explained, {} crashed, {} invalid",
                        a.id, version.id, c.killed, c.survived, c.explained, c.crashed, c.invalid
                    ),
                )
                .await?;
        }
        Err(why) => state.db.fail_packet_audit(a.id, &why).await?,
    }
    Ok(())
}
