//! Assignments: the list, the invite form and the invite link shown once.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::shell::CsrfField;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssignmentRow {
    pub id: String,
    pub candidate: String,
    pub email: String,
    pub slug: String,
    /// "v2".
    pub version: String,
    /// invited, started, submitted, grading, graded or failed.
    pub state: String,
    /// "2026-12-01 17:00 UTC".
    pub deadline: String,
    pub created: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AssignmentListView {
    pub filter: Option<String>,
    /// Slugs to filter by.
    pub slugs: Vec<String>,
    pub can_invite: bool,
    pub rows: Vec<AssignmentRow>,
}

#[component]
pub fn AssignmentListPage(vm: AssignmentListView) -> impl IntoView {
    let options = vm
        .slugs
        .iter()
        .map(|s| {
            let selected = vm.filter.as_deref() == Some(s.as_str());
            view! { <option value=s.clone() selected=selected>{s.clone()}</option> }
        })
        .collect_view();
    let invite_href = match &vm.filter {
        Some(s) => format!("/assignments/new?packet={s}"),
        None => "/assignments/new".to_string(),
    };
    let invite = vm
        .can_invite
        .then(|| view! { <p><a class="button" href=invite_href>"Invite a candidate"</a></p> });
    let empty = vm.rows.is_empty().then(|| view! { <p class="empty">"No assignments yet."</p> });
    let rows = vm
        .rows
        .into_iter()
        .map(|r| {
            let href = format!("/assignments/{}", r.id);
            let class = format!("state state-{}", r.state);
            view! {
                <tr>
                    <td><a href=href>{r.candidate}</a></td>
                    <td>{r.email}</td>
                    <td>{r.slug}" "{r.version}</td>
                    <td class=class>{r.state}</td>
                    <td>{r.deadline}</td>
                    <td>{r.created}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <h1>"Assignments"</h1>
        {invite}
        <form method="get" action="/assignments" class="filter">
            <label>"Packet "
                <select name="packet">
                    <option value="">"all"</option>
                    {options}
                </select>
            </label>
            <button type="submit">"Filter"</button>
        </form>
        <table class="assignments">
            <thead><tr><th>"Candidate"</th><th>"Email"</th><th>"Packet"</th><th>"State"</th><th>"Deadline"</th><th>"Invited"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
        {empty}
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PacketChoice {
    pub slug: String,
    pub title: String,
    pub version: String,
    /// The packet version's own time box, in minutes.
    #[serde(default)]
    pub time_box_minutes: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NewAssignmentView {
    pub csrf: String,
    /// Packets with a published version.
    pub packets: Vec<PacketChoice>,
    pub selected: Option<String>,
    pub candidate_name: String,
    pub email: String,
    /// `YYYY-MM-DDTHH:MM`, UTC.
    pub deadline: String,
    pub time_box_minutes: String,
    /// What the candidate sees of results: never, after-review, immediately
    /// (empty: never).
    pub results: String,
    /// Submissions accepted (empty: 3).
    pub max_submissions: String,
    pub error: Option<String>,
    /// Whether this server can email the link (SMTP is set up).
    #[serde(default)]
    pub can_email: bool,
    /// The "email the link" box (checked by default when email works).
    #[serde(default)]
    pub send_email: bool,
    /// Blind review of this assignment.
    #[serde(default)]
    pub blind_review: bool,
}

/// What a packet's time box is, in words.
pub fn time_box_words(minutes: Option<u64>) -> String {
    match minutes {
        Some(m) => format!("{m} min"),
        None => "none".to_string(),
    }
}

#[component]
pub fn NewAssignmentPage(vm: NewAssignmentView) -> impl IntoView {
    let options = vm
        .packets
        .iter()
        .map(|p| {
            let selected = vm.selected.as_deref() == Some(p.slug.as_str());
            let label = format!("{} ({}, {}; time box {})", p.title, p.slug, p.version, time_box_words(p.time_box_minutes));
            view! { <option value=p.slug.clone() selected=selected data-time-box=p.time_box_minutes.map(|m| m.to_string())>{label}</option> }
        })
        .collect_view();
    let chosen = vm
        .packets
        .iter()
        .find(|p| vm.selected.as_deref() == Some(p.slug.as_str()))
        .or(vm.packets.first());
    let time_box_hint = match chosen {
        Some(p) => format!(
            "Prefilled with the packet's time box ({} for {}). Change it to give this candidate another; empty: the packet's own applies (shown in the menu above).",
            time_box_words(p.time_box_minutes),
            p.slug
        ),
        None => "Empty: the packet's own time box applies.".to_string(),
    };
    let email_box = vm.can_email.then(|| {
        view! {
            <label class="inline"><input type="checkbox" name="send_email" value="on" checked=vm.send_email />" Email the link to the candidate (with the deadline and time box)"</label>
        }
    });
    let no_email = (!vm.can_email).then(|| view! { <p class="hint">"Email is not set up on this server (GATEHOUSE_SMTP_*): copy the link from the next page and send it yourself."</p> });
    view! {
        <h1>"Invite a candidate"</h1>
        {vm.error.map(|e| view! { <p class="error" role="alert">{e}</p> })}
        <form method="post" action="/assignments" class="invite-form">
            <CsrfField token=vm.csrf />
            <label>"Packet (newest published version)" <select name="packet" required>{options}</select></label>
            <label>"Candidate name" <input type="text" name="candidate_name" required maxlength="200" value=vm.candidate_name /></label>
            <label>"Email" <input type="email" name="email" required maxlength="254" value=vm.email /></label>
            <label>"Deadline (UTC)" <input type="datetime-local" name="deadline" required value=vm.deadline /></label>
            <label>"Time box in minutes" <input type="number" name="time_box_minutes" min="1" max="100000" value=vm.time_box_minutes /></label>
            <p class="hint time-box-hint">{time_box_hint}</p>
            <label>
                "The candidate sees their decision and score "
                <select name="results">
                    <option value="never" selected=vm.results.is_empty() || vm.results == "never">"never (received, graded and the receipt digest only)"</option>
                    <option value="after-review" selected=vm.results == "after-review">"after a reviewer has scored it"</option>
                    <option value="immediately" selected=vm.results == "immediately">"as soon as it is graded"</option>
                </select>
            </label>
            <label>"Submissions accepted (empty: 3)" <input type="number" name="max_submissions" min="1" max="100" value=vm.max_submissions /></label>
            <label class="inline"><input type="checkbox" name="blind_review" value="on" checked=vm.blind_review />" Blind review: reviewers see a pseudonym, not the name or email, until they have saved their scores"</label>
            {email_box}
            {no_email}
            <button type="submit">"Create invite link"</button>
        </form>
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InvitedView {
    pub assignment_id: String,
    pub candidate: String,
    pub email: String,
    pub slug: String,
    /// The link, present only the first time the page is shown.
    pub url: Option<String>,
    pub csrf: String,
    /// What became of the invite email: (sent, sentence).
    #[serde(default)]
    pub mailed: Option<(bool, String)>,
    #[serde(default)]
    pub can_email: bool,
}

#[component]
pub fn InvitedPage(vm: InvitedView) -> impl IntoView {
    let href = format!("/assignments/{}", vm.assignment_id);
    let reissue = format!("/assignments/{}/reissue", vm.assignment_id);
    let link = match vm.url {
        Some(url) => view! {
            <p class="flash shown-once" role="status"><strong>"Copy this link now: it will not be shown again."</strong>" Gatehouse keeps only its hash, so this page shows it once; after a reload only a reissue (a new link) can give one."</p>
            <p>"Send it to the candidate:"</p>
            <div class="copy-row">
                <label for="invite-url" class="sr-only">"Invite link"</label>
                <input type="text" id="invite-url" class="invite-url" readonly value=url />
                <crate::islands::CopyButton target="invite-url".to_string() />
            </div>
        }
        .into_any(),
        None => view! { <p class="shown-once-gone">"The link was shown once, when the invite was made, and is not stored (only its hash is). To get a link now, reissue it below: the old one stops working."</p> }.into_any(),
    };
    let mailed = vm.mailed.map(|(sent, text)| {
        let class = if sent { "flash mail-sent" } else { "flash error mail-failed" };
        view! { <p class=class role="status">{text}</p> }
    });
    let email_box = vm.can_email.then(|| {
        let label = format!(" Email the new link to {}", vm.email);
        view! { <label class="inline"><input type="checkbox" name="send_email" value="on" checked=true />{label}</label> }
    });
    view! {
        <h1>"Invite for "{vm.candidate}</h1>
        <p>"Packet "{vm.slug}". "<a href=href>"Open the assignment"</a></p>
        {mailed}
        {link}
        <details class="secondary-action reissue">
            <summary>"Reissue the link…"</summary>
            <p>"A new link replaces this one: the current link and its model key stop working at once. Use it when a link was lost or leaked."</p>
            <form method="post" action=reissue>
                <CsrfField token=vm.csrf />
                <label class="inline"><input type="checkbox" name="confirm" value="yes" required />" Yes, stop the current link"</label>
                {email_box}
                <button type="submit" class="secondary">"Reissue the link"</button>
            </form>
        </details>
    }
}
