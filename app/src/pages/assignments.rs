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
    let invite = vm.can_invite.then(|| view! { <p><a class="button" href=invite_href>"Invite a candidate"</a></p> });
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
}

#[component]
pub fn NewAssignmentPage(vm: NewAssignmentView) -> impl IntoView {
    let options = vm
        .packets
        .iter()
        .map(|p| {
            let selected = vm.selected.as_deref() == Some(p.slug.as_str());
            view! { <option value=p.slug.clone() selected=selected>{p.slug.clone()}" — "{p.title.clone()}" ("{p.version.clone()}")"</option> }
        })
        .collect_view();
    view! {
        <h1>"Invite a candidate"</h1>
        {vm.error.map(|e| view! { <p class="error" role="alert">{e}</p> })}
        <form method="post" action="/assignments" class="narrow">
            <CsrfField token=vm.csrf />
            <label>"Packet (newest published version)" <select name="packet" required>{options}</select></label>
            <label>"Candidate name" <input type="text" name="candidate_name" required value=vm.candidate_name /></label>
            <label>"Email" <input type="email" name="email" required value=vm.email /></label>
            <label>"Deadline (UTC)" <input type="datetime-local" name="deadline" required value=vm.deadline /></label>
            <label>"Time box in minutes (empty: none)" <input type="number" name="time_box_minutes" min="1" value=vm.time_box_minutes /></label>
            <label>
                "The candidate sees their decision and score "
                <select name="results">
                    <option value="never" selected=vm.results.is_empty() || vm.results == "never">"never (received, graded and the receipt digest only)"</option>
                    <option value="after-review" selected=vm.results == "after-review">"after a reviewer has scored it"</option>
                    <option value="immediately" selected=vm.results == "immediately">"as soon as it is graded"</option>
                </select>
            </label>
            <label>"Submissions accepted (empty: 3)" <input type="number" name="max_submissions" min="1" max="100" value=vm.max_submissions /></label>
            <button type="submit">"Create invite link"</button>
        </form>
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InvitedView {
    pub assignment_id: String,
    pub candidate: String,
    pub slug: String,
    /// The link, present only the first time the page is shown.
    pub url: Option<String>,
    pub csrf: String,
}

#[component]
pub fn InvitedPage(vm: InvitedView) -> impl IntoView {
    let href = format!("/assignments/{}", vm.assignment_id);
    let reissue = format!("/assignments/{}/reissue", vm.assignment_id);
    let link = match vm.url {
        Some(url) => view! {
            <p>"Send this link to the candidate. It is shown only now; Gatehouse keeps only its hash."</p>
            <p><input type="text" class="invite-url" readonly size="80" value=url.clone() /></p>
            <p><code class="invite-url">{url}</code></p>
        }
        .into_any(),
        None => view! { <p>"The link was shown once and is not stored. Reissue it to get a new one (the old one stops working)."</p> }.into_any(),
    };
    view! {
        <h1>"Invite for "{vm.candidate}</h1>
        <p>"Packet "{vm.slug}". "<a href=href>"Open the assignment"</a></p>
        {link}
        <form method="post" action=reissue>
            <CsrfField token=vm.csrf />
            <button type="submit">"Reissue the link"</button>
        </form>
    }
}
