//! The scorecard: its view model in evidence order, and the assignment and scorecard pages.

use app::contract::SubmissionState;

use app::pages::review::{
    AssignmentPage, AssignmentView, CardView, CriterionView, FileChange, FindingView, GateView,
    HistoryRow, HumanForm, RunView, ScorecardPage, ScorecardView, SubmissionLine, ToolView,
};
use axum::extract::{Path, Query, State};
use axum::response::{Html, IntoResponse, Response};
use grader::grade::Scorecard;
use grader::manifest::Mode;
use grader::score::Status;
use grader::tree::Tree;
use leptos::prelude::*;
use serde::Deserialize;

use crate::db::Role;
use crate::error::AppError;
use crate::state::AppState;
use crate::web::session::SignedIn;

use super::compare::similar_to;
use super::files::{answer_index, attach_diffs, attach_scored_files, provenance_of};
use super::*;

/// The scorecard as the pages and the standalone receipt show it.
pub fn card_view_model(card: &Scorecard, starter: Option<&Tree>) -> CardView {
    let r = &card.receipt;
    let gates = card
        .scoring
        .gates
        .iter()
        .map(|g| GateView {
            label: g.gate.clone(),
            result: g.result.clone(),
            message: g.message.clone(),
        })
        .collect();
    let findings = card
        .findings
        .iter()
        .map(|f| FindingView {
            id: f.id.clone(),
            title: f.title.clone(),
            provenance: serde_json::to_value(f.provenance)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            evidence: f.evidence.clone(),
        })
        .collect();
    let criteria = card
        .scoring
        .criteria
        .iter()
        .map(|c| CriterionView {
            id: c.id.clone(),
            title: c.title.clone(),
            mode: mode_word(c.mode).into(),
            level: match (c.status, c.level) {
                (Status::Pending, _) | (_, None) => "pending".into(),
                (Status::AfterGate, Some(l)) => format!("{l} (not counted)"),
                (_, Some(l)) => l.to_string(),
            },
            max: c.max,
            weight: c.weight,
            status: match c.status {
                Status::Scored => "scored",
                Status::Pending => "pending",
                Status::AfterGate => "after-gate",
            }
            .into(),
            basis: c.basis.clone(),
            level_text: c.level_text.clone(),
        })
        .collect();
    let runs = r
        .runs
        .iter()
        .map(|run| {
            let mut outcome = match run.exit {
                grader::sandbox::Exit::Code(c) => format!("exit {c}"),
                grader::sandbox::Exit::Signal(s) => format!("killed by signal {s}"),
            };
            if run.timed_out {
                outcome.push_str(", timed out");
            }
            let limit_hit = run.limit_hit.map(|l| {
                serde_json::to_value(l)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default()
            });
            if let Some(l) = &limit_hit {
                outcome.push_str(&format!(", {l} limit hit"));
            }
            let ok = matches!(run.exit, grader::sandbox::Exit::Code(0)) && !run.timed_out;
            let duration = r
                .timings
                .runs
                .iter()
                .find(|t| t.id == run.id)
                .map(|t| format!("{:.2} s", t.wall_ms / 1000.0))
                .unwrap_or_default();
            let (tests, failed_tests) = match &run.tests {
                Some(t) => {
                    let counted: Vec<_> = t
                        .iter()
                        .filter(|t| t.status != grader::evidence::TestStatus::Skipped)
                        .collect();
                    let passed = counted
                        .iter()
                        .filter(|t| t.status == grader::evidence::TestStatus::Passed)
                        .count();
                    let failed = counted
                        .iter()
                        .filter(|t| t.status != grader::evidence::TestStatus::Passed)
                        .map(|t| match t.message.as_deref().filter(|m| !m.is_empty()) {
                            // The reason names a crash where there was one.
                            Some(m) => {
                                format!("{}::{}: {} ({m})", t.classname, t.name, t.status.word())
                            }
                            None => format!("{}::{}: {}", t.classname, t.name, t.status.word()),
                        })
                        .collect();
                    (Some(format!("{passed} / {} passed", counted.len())), failed)
                }
                None => (None, Vec::new()),
            };
            RunView {
                id: run.id.clone(),
                command: run.command.clone(),
                outcome,
                status: if ok { "ok" } else { "failed" }.into(),
                duration,
                timed_out: run.timed_out,
                limit_hit,
                leftovers: run.leftovers.clone(),
                tests,
                failed_tests,
                crash: run.crash.clone(),
                stdout_tail: run.stdout_tail.clone(),
                stderr_tail: run.stderr_tail.clone(),
            }
        })
        .collect();
    let frozen = r
        .frozen
        .iter()
        .map(|f| FileChange {
            path: f.path.clone(),
            change: if f.changed {
                "changed".into()
            } else if f.submitted_sha256.is_none() {
                "not-submitted".into()
            } else {
                "unchanged".into()
            },
            size: 0,
            sha256: f.submitted_sha256.clone().unwrap_or_else(|| f.starter_sha256.clone()),
            diff: Vec::new(),
            diff_note: None,
            model_calls: Vec::new(),
        })
        .collect();
    let mutation = r.mutation.as_ref().map(|m| {
        let survived: Vec<&str> =
            m.mutants.iter().filter(|x| !x.killed).map(|x| x.id.as_str()).collect();
        let mut s =
            format!("the candidate's tests killed {} of {} mutants", m.killed(), m.mutants.len());
        if !survived.is_empty() {
            s.push_str(&format!("; survived: {}", survived.join(", ")));
        }
        s
    });
    let tools = card
        .environment
        .tools
        .iter()
        .map(|t| ToolView {
            name: t.name.clone(),
            pin: t.pin.clone().unwrap_or_else(|| "-".into()),
            probed: t.probed.clone().unwrap_or_else(|| "none".into()),
            matches: t.matches,
        })
        .collect();
    let frozen_paths: Vec<&String> = r.frozen.iter().map(|f| &f.path).collect();
    let files = r
        .submission
        .files
        .iter()
        .map(|f| {
            let change = match starter.map(|s| s.get(&f.path)) {
                None => "submitted",
                Some(None) => "added",
                Some(Some((_, sha))) if sha == &f.sha256 => "unchanged",
                Some(Some(_)) if frozen_paths.contains(&&f.path) => "frozen-changed",
                Some(Some(_)) => "changed",
            };
            FileChange {
                path: f.path.clone(),
                change: change.into(),
                size: f.size,
                sha256: f.sha256.clone(),
                diff: Vec::new(),
                diff_note: None,
                model_calls: Vec::new(),
            }
        })
        // Files the platform put in the starter (the pin file, the brief)
        // were handed back but set aside: listed, never diffed or graded.
        .chain(r.submission.platform_files.iter().map(|f| FileChange {
            path: f.path.clone(),
            change: "platform".into(),
            size: f.size,
            sha256: f.sha256.clone(),
            diff: Vec::new(),
            diff_note: None,
            model_calls: Vec::new(),
        }))
        .collect();
    CardView {
        model_share: None,
        decision: card.scoring.decision.clone(),
        score: score_label(card),
        gates,
        caps: card.scoring.caps.clone(),
        pending: card.scoring.pending.clone(),
        findings,
        unevaluated: card
            .unevaluated
            .iter()
            .chain(&card.skipped)
            .map(|u| (u.id.clone(), u.reason.clone()))
            .collect(),
        not_witnessed: card
            .not_witnessed
            .iter()
            .map(|u| (u.id.clone(), u.reason.clone()))
            .collect(),
        criteria,
        runs,
        frozen,
        mutation,
        tools,
        mismatches: card.environment.mismatches.clone(),
        // Evidence kept without Landlock is listed with the fallback that
        // explains it.
        sandbox_fallbacks: r
            .sandbox
            .fallbacks
            .iter()
            .cloned()
            .chain(r.untrusted_evidence.iter().map(|e| format!("untrusted evidence: {e}")))
            .collect(),
        files,
        normalised: normalised_lines(&r.submission.normalised),
        archive_sha256: r.submission.archive_sha256.clone(),
        workspace_digest: r.submission.workspace_digest.clone(),
        receipt_digest: r.digest.clone(),
        graded_digest: r.graded_digest.clone(),
        packet_digest: r.packet.digest.clone(),
        witness_sha256: r.witness_sha256.clone(),
    }
}

/// What ingestion normalised, in sentences for the scorecard.
fn normalised_lines(n: &grader::ingest::Normalised) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(top) = &n.unwrapped {
        out.push(format!("the zip held everything in one folder, {top}/, which was unwrapped"));
    }
    if !n.dropped.is_empty() {
        let more = if n.dropped_unlisted > 0 {
            format!(" and {} more", n.dropped_unlisted)
        } else {
            String::new()
        };
        out.push(format!(
            "operating-system metadata left out, never graded: {}{more}",
            n.dropped.join(", ")
        ));
    }
    if !n.backslashes.is_empty() {
        let more = if n.backslashes_unlisted > 0 {
            format!(" and {} more", n.backslashes_unlisted)
        } else {
            String::new()
        };
        out.push(format!(
            "entries written with \\ as the separator, read as /: {}{more}",
            n.backslashes.join(", ")
        ));
    }
    out
}

/// The reviewer's form for the platform-wide `evidence-tampering` veto.
fn tamper_override_form(card: &grader::grade::Scorecard) -> HumanForm {
    HumanForm {
        criterion: grader::tamper::ID.into(),
        title: "Evidence tampering: the veto to the lowest decision".into(),
        mode: "veto".into(),
        levels: vec![
            (0, "The veto stands: the submission interfered with the grader's evidence.".into()),
            (
                1,
                "Override the veto: the evidence shows no interference (the reason is kept)."
                    .into(),
            ),
        ],
        current: card
            .scoring
            .caps
            .iter()
            .any(|c| c.starts_with("evidence-tampering veto overridden"))
            .then_some(1),
        file: None,
    }
}

fn mode_word(m: Mode) -> &'static str {
    match m {
        Mode::Auto => "auto",
        Mode::Human => "human",
        Mode::AutoOverride => "auto-override",
    }
}

pub(super) async fn assignment_page(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Reviewer)?;
    let mut a = state
        .db
        .assignment_by_id(&id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("assignment {id:?}")))?;
    let mut all = state.db.submissions_of(&id).await?;
    // Blind review: a reviewer (authors manage the invite and know the
    // candidate) sees the pseudonym of the latest graded submission until
    // they have scored it.
    if a.blind_review && signed_in.user.role == Role::Reviewer {
        let latest = all.iter().find(|s| s.state == SubmissionState::Graded);
        let card = latest.and_then(|s| parse_card(s).ok().flatten());
        let hide = match latest {
            Some(s) => hides_candidate(&state, &a, &s.id, card.as_ref(), signed_in.user.id).await?,
            None => true,
        };
        if hide {
            a.candidate_name = latest
                .map(|s| blind_label(&s.id))
                .unwrap_or_else(|| "Candidate (blind review)".into());
            a.email = "hidden under blind review".into();
        }
    }
    // The last graded submission first, then the rest newest first (the
    // sort is stable over the newest-first list); every one is kept.
    all.sort_by_key(|s| s.state != SubmissionState::Graded);
    let submissions = all
        .into_iter()
        .map(|s| {
            let card = parse_card(&s).ok().flatten();
            SubmissionLine {
                id: s.id.clone(),
                received_at: when(s.received_at),
                state: s.state.to_string(),
                decision: s.decision.clone(),
                score: card.as_ref().map(score_label),
            }
        })
        .collect();
    let view = AssignmentView {
        id: a.id.clone(),
        candidate: a.candidate_name.clone(),
        email: a.email.clone(),
        slug: a.slug.clone(),
        version: version_label(&a),
        deadline: when(a.deadline),
        state: a.state.clone(),
        submissions,
        csrf: signed_in.csrf.clone(),
        refusals: state
            .db
            .audit_entries(Some(&format!("assignment:{}", a.id)), 1000)
            .await?
            .into_iter()
            .filter(|e| e.action == "submission.refused")
            .map(|e| (when(e.at), e.detail))
            .collect(),
        can_manage: signed_in.user.role >= Role::Author,
        can_erase: signed_in.user.role == Role::Admin,
        erased: match a.erased_at {
            Some(_) => state.db.erasure_of(&a.id).await?.map(|e| {
                format!(
                    "This candidate's data was erased on {} by {} ({}): {}.",
                    when(e.at),
                    e.actor,
                    e.reason,
                    crate::erasure::Erased::from(&e).summary()
                )
            }),
            None => None,
        },
        model_key_active: state
            .db
            .model_keys_of(&a.id)
            .await?
            .iter()
            .any(|k| k.revoked_at.is_none()),
    };
    let meta = meta(&signed_in, format!("Assignment {}", a.candidate_name), None);
    Ok(Html(app::shell::document(meta, move || view! { <AssignmentPage view=view /> }))
        .into_response())
}

#[derive(Deserialize, Default)]
pub(super) struct FlashQuery {
    scored: Option<String>,
    regrade: Option<String>,
}

pub(super) async fn scorecard_page(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    Query(q): Query<FlashQuery>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Reviewer)?;
    let mut ctx = context(&state, &id).await?;
    let card = parse_card(&ctx.submission)?;
    let blind = blind_for(&state, &mut ctx, card.as_ref(), signed_in.user.id).await?;
    let manifest = manifest_of(&state, &ctx.version).await?;
    let starter = starter_of(&state, &ctx).await;
    let mut forms = match &card {
        Some(card) => manifest
            .criteria
            .iter()
            .filter(|c| c.mode != Mode::Auto)
            .map(|c| HumanForm {
                criterion: c.id.clone(),
                title: c.title.clone(),
                mode: mode_word(c.mode).into(),
                levels: c.levels.iter().enumerate().map(|(i, t)| (i as u32, t.clone())).collect(),
                current: card.scoring.criteria.iter().find(|s| s.id == c.id).and_then(|s| s.level),
                file: None,
            })
            .chain(
                card.findings
                    .iter()
                    .any(|f| f.id == grader::tamper::ID)
                    .then(|| tamper_override_form(card)),
            )
            .collect(),
        None => Vec::new(),
    };
    let history = state
        .db
        .human_scores(&id)
        .await?
        .into_iter()
        .rev()
        .map(|h| HistoryRow {
            when: when(h.created_at),
            who: h.reviewer_name,
            criterion: h.criterion,
            level: h.level,
            reason: h.reason,
        })
        .collect();
    let flash = match (q.scored, q.regrade) {
        (Some(c), _) => Some(format!("Score for {c} saved; the decision was recomputed.")),
        (_, Some(_)) => Some("Regrade queued on the stored packet version.".into()),
        _ => None,
    };
    let view = ScorecardView {
        id: ctx.submission.id.clone(),
        assignment_id: ctx.assignment.id.clone(),
        candidate: ctx.assignment.candidate_name.clone(),
        slug: ctx.assignment.slug.clone(),
        version: version_label(&ctx.assignment),
        received_at: when(ctx.submission.received_at),
        graded_at: ctx.submission.graded_at.map(when),
        state: ctx.submission.state.to_string(),
        error: ctx.submission.error.clone(),
        refusal: ctx.submission.refusal.clone(),
        card: match &card {
            Some(c) => {
                let mut v = card_view_model(c, starter.as_ref().map(|s| &s.tree));
                let index = answer_index(&state, &ctx).await?;
                attach_diffs(
                    &state,
                    starter.as_ref(),
                    &c.receipt.submission.archive_sha256,
                    c.receipt.submission.normalised.unwrapped.clone(),
                    &mut v,
                    &index,
                )
                .await;
                if !index.is_empty() {
                    let p = provenance_of(
                        &state,
                        starter.as_ref(),
                        &c.receipt.submission.archive_sha256,
                        c.receipt.submission.normalised.unwrapped.clone(),
                        &v.files,
                        &index,
                    )
                    .await;
                    v.model_share = Some(p.sentence());
                }
                attach_scored_files(
                    &state,
                    &manifest,
                    &c.receipt.submission.archive_sha256,
                    c.receipt.submission.normalised.unwrapped.clone(),
                    &v,
                    &mut forms,
                )
                .await;
                Some(v)
            }
            None => None,
        },
        forms,
        history,
        csrf: signed_in.csrf.clone(),
        ledger: crate::grading::witness_of(&state, &ctx.assignment.id, ctx.submission.received_at)
            .await?
            .map(|w| ledger_view(&w)),
        blind,
        similar: similar_to(&state, &ctx.assignment.slug, &ctx.submission.id, signed_in.user.id)
            .await?,
        transcript: crate::transcript::entries(
            &state,
            &ctx.assignment.id,
            Some(ctx.submission.received_at),
        )
        .await?
        .0,
    };
    let meta = meta(&signed_in, format!("Scorecard {}", ctx.assignment.candidate_name), flash);
    Ok(Html(app::shell::document(meta, move || view! { <ScorecardPage view=view /> }))
        .into_response())
}
