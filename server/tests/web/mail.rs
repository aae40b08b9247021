//! Invite emails, against a local SMTP sink the test starts: a tiny tokio
//! TCP server on 127.0.0.1, port 0, speaking enough SMTP (EHLO, MAIL, RCPT,
//! DATA, QUIT) to capture each message. The email carries the link shown on
//! the page, the deadline and the time box that applies, as plain text and
//! HTML; nothing is sent unless asked, and a mail server that is down is
//! said on the page while the invite still stands.

use std::sync::{Arc, Mutex};

use base64::Engine;
use gatehouse::db::Role;
use reqwest::StatusCode;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::assignments::invite_url;
use crate::auth::{page, signed_in};
use crate::library::null_status;
use crate::support::TestApp;

/// One message the sink took.
#[derive(Debug, Clone, Default)]
pub struct Captured {
    pub from: String,
    pub to: Vec<String>,
    /// The DATA, dot-unstuffed, with CRLF line ends.
    pub data: String,
}

impl Captured {
    /// The decoded body of the part whose Content-Type starts with `mime`.
    pub fn part(&self, mime: &str) -> Option<String> {
        let boundary = self.data.split("boundary=\"").nth(1)?.split('"').next()?.to_string();
        for part in self.data.split(&format!("--{boundary}")) {
            let Some((head, body)) = part.split_once("\r\n\r\n") else { continue };
            let lower = head.to_ascii_lowercase();
            if !lower.contains(&format!("content-type: {mime}")) {
                continue;
            }
            return Some(if lower.contains("content-transfer-encoding: base64") {
                let b64: String = body.split_whitespace().collect();
                String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b64).ok()?)
                    .ok()?
            } else if lower.contains("content-transfer-encoding: quoted-printable") {
                quoted_printable(body)
            } else {
                body.to_string()
            });
        }
        None
    }

    pub fn header(&self, name: &str) -> Option<String> {
        let head = self.data.split("\r\n\r\n").next()?;
        let prefix = format!("{}:", name.to_ascii_lowercase());
        head.split("\r\n")
            .find(|l| l.to_ascii_lowercase().starts_with(&prefix))
            .map(|l| l[prefix.len()..].trim().to_string())
    }
}

fn quoted_printable(body: &str) -> String {
    let joined = body.replace("=\r\n", "");
    let bytes = joined.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'='
            && i + 2 < bytes.len()
            && let Ok(b) =
                u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"), 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The SMTP sink: listens on 127.0.0.1, port 0, until dropped.
pub struct SmtpSink {
    pub port: u16,
    pub messages: Arc<Mutex<Vec<Captured>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SmtpSink {
    pub async fn start() -> SmtpSink {
        let listener =
            tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the SMTP sink");
        let port = listener.local_addr().unwrap().port();
        let messages = Arc::new(Mutex::new(Vec::new()));
        let store = messages.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let store = store.clone();
                tokio::spawn(async move {
                    let _ = session(stream, store).await;
                });
            }
        });
        SmtpSink { port, messages, task }
    }

    pub fn taken(&self) -> Vec<Captured> {
        self.messages.lock().unwrap().clone()
    }

    /// Points an app's configuration at the sink (plain SMTP, no TLS).
    pub fn configure(&self, c: &mut gatehouse::config::Config) {
        c.smtp_host = Some("127.0.0.1".into());
        c.smtp_port = Some(self.port);
        c.smtp_from = Some("Gatehouse Hiring <hiring@example.test>".into());
        c.smtp_tls = Some("off".into());
    }
}

async fn session(
    stream: tokio::net::TcpStream,
    store: Arc<Mutex<Vec<Captured>>>,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    write.write_all(b"220 sink.test ESMTP\r\n").await?;
    let mut current = Captured::default();
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let cmd = line.trim_end().to_string();
        let upper = cmd.to_ascii_uppercase();
        if upper.starts_with("EHLO") {
            write.write_all(b"250-sink.test\r\n250 8BITMIME\r\n").await?;
        } else if upper.starts_with("HELO")
            || upper.starts_with("RSET")
            || upper.starts_with("NOOP")
        {
            write.write_all(b"250 OK\r\n").await?;
        } else if upper.starts_with("MAIL FROM:") {
            current = Captured { from: cmd[10..].trim().to_string(), ..Captured::default() };
            write.write_all(b"250 OK\r\n").await?;
        } else if upper.starts_with("RCPT TO:") {
            current.to.push(cmd[8..].trim().to_string());
            write.write_all(b"250 OK\r\n").await?;
        } else if upper == "DATA" {
            write.write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n").await?;
            let mut data = String::new();
            loop {
                line.clear();
                if lines.read_line(&mut line).await? == 0 {
                    return Ok(());
                }
                let l = line.trim_end_matches(['\r', '\n']);
                if l == "." {
                    break;
                }
                data.push_str(l.strip_prefix('.').filter(|_| l.starts_with("..")).unwrap_or(l));
                data.push_str("\r\n");
            }
            current.data = data;
            store.lock().unwrap().push(std::mem::take(&mut current));
            write.write_all(b"250 OK queued\r\n").await?;
        } else if upper.starts_with("QUIT") {
            write.write_all(b"221 bye\r\n").await?;
            return Ok(());
        } else {
            write.write_all(b"502 not implemented\r\n").await?;
        }
    }
}

/// An app with null-status (time box 90 min) published as a built-in, with
/// `tweak` applied to its configuration.
async fn app_with(
    tweak: impl FnOnce(&mut gatehouse::config::Config),
) -> (TestApp, tempfile::TempDir) {
    let packets = tempfile::tempdir().unwrap();
    grader::tree::copy_path(&null_status(), &packets.path().join("null-status")).unwrap();
    let dir = packets.path().to_path_buf();
    let app = TestApp::spawn_with(move |c| {
        c.packets_dir = dir;
        tweak(c);
    })
    .await;
    gatehouse::library::load_builtin(&app.state).await.unwrap();
    (app, packets)
}

async fn invite(
    app: &TestApp,
    client: &reqwest::Client,
    csrf: &str,
    time_box: &str,
    send_email: bool,
) -> reqwest::Response {
    let mut form = vec![
        ("csrf", csrf),
        ("packet", "null-status"),
        ("candidate_name", "Ada <Candidate>"),
        ("email", "ada@example.test"),
        ("deadline", "2099-01-01T12:30"),
        ("time_box_minutes", time_box),
    ];
    if send_email {
        form.push(("send_email", "on"));
    }
    client.post(app.url("/assignments")).form(&form).send().await.unwrap()
}

#[tokio::test]
async fn the_invite_email_carries_the_link_deadline_and_time_box_as_text_and_html() {
    let sink = SmtpSink::start().await;
    let (app, _p) = app_with(|c| sink.configure(c)).await;
    let (client, csrf) = signed_in(&app, Role::Author).await;
    let form =
        page(&client, app.url("/assignments/new?packet=null-status")).await.text().await.unwrap();
    assert!(
        form.contains(r#"name="send_email""#) && form.contains("checked"),
        "email is offered when SMTP is set up: {form}"
    );
    // The time box is prefilled with the packet's own, and says so.
    assert!(form.contains(r#"name="time_box_minutes" min="1" max="100000" value="90""#), "{form}");
    assert!(
        form.contains("Prefilled with the packet&#x27;s time box (90 min for null-status)")
            || form.contains("Prefilled with the packet's time box (90 min for null-status)"),
        "{form}"
    );

    let r = invite(&app, &client, &csrf, "", true).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let to = r.headers()["location"].to_str().unwrap().to_string();
    let html = page(&client, app.url(&to)).await.text().await.unwrap();
    let url = invite_url(&html).expect("the link is shown too");
    assert!(html.contains("Emailed the link to ada@example.test"), "{html}");

    let taken = sink.taken();
    assert_eq!(taken.len(), 1, "{taken:?}");
    let m = &taken[0];
    assert_eq!(m.to, ["<ada@example.test>"]);
    assert_eq!(m.from, "<hiring@example.test>");
    assert!(m.header("subject").unwrap().contains("Your take-home:"), "{}", m.data);
    assert!(m.data.to_ascii_lowercase().contains("multipart/alternative"), "{}", m.data);
    let text = m.part("text/plain").expect("a plain-text part");
    let body = m.part("text/html").expect("an HTML part");
    for want in
        [url.as_str(), "2099-01-01 12:30 UTC", "Time box: 90 min", "Submissions accepted: 3"]
    {
        assert!(text.contains(want), "{want:?} in the text part:\n{text}");
    }
    assert!(
        body.contains(&format!("href=\"{url}\""))
            && body.contains("90 min")
            && body.contains("2099-01-01 12:30 UTC"),
        "{body}"
    );
    assert!(
        body.contains("Ada &lt;Candidate&gt;") && !body.contains("<Candidate>"),
        "names are escaped in HTML: {body}"
    );

    // The audit says it was sent, never with the link.
    let a = app.state.db.list_assignments(None).await.unwrap().remove(0);
    let audit =
        app.state.db.audit_entries(Some(&format!("assignment:{}", a.id)), 10).await.unwrap();
    let row = audit
        .iter()
        .find(|e| e.action == "assignment.invite_email")
        .expect("an audit row for the email");
    let token = url.rsplit_once("/c/").unwrap().1;
    assert!(!format!("{audit:?}").contains(token), "the link never reaches the audit log");
    assert!(format!("{row:?}").contains("sent to ada@example.test"), "{row:?}");

    // Reissue with the email box: the new link goes out, the old one is dead.
    let r = client
        .post(app.url(&format!("/assignments/{}/reissue", a.id)))
        .form(&[("csrf", csrf.as_str()), ("confirm", "yes"), ("send_email", "on")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let html = page(&client, app.url(&to)).await.text().await.unwrap();
    let new_url = invite_url(&html).unwrap();
    assert_ne!(new_url, url);
    let taken = sink.taken();
    assert_eq!(taken.len(), 2);
    assert!(taken[1].part("text/plain").unwrap().contains(&new_url));

    // An explicit time box is the one the email names.
    invite(&app, &client, &csrf, "45", true).await;
    let taken = sink.taken();
    assert!(taken[2].part("text/plain").unwrap().contains("Time box: 45 min"), "{}", taken[2].data);
}

#[tokio::test]
async fn no_email_unless_asked_or_set_up_and_a_down_mail_server_is_said() {
    let sink = SmtpSink::start().await;
    let (app, _p) = app_with(|c| sink.configure(c)).await;
    let (client, csrf) = signed_in(&app, Role::Author).await;
    let r = invite(&app, &client, &csrf, "", false).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let html = page(&client, app.url(r.headers()["location"].to_str().unwrap()))
        .await
        .text()
        .await
        .unwrap();
    assert!(invite_url(&html).is_some() && !html.contains("Emailed the link"), "{html}");
    assert!(sink.taken().is_empty(), "nothing is sent unless asked");

    // Without SMTP settings the form says how to send the link instead.
    let (plain, _p2) = app_with(|_| {}).await;
    let (client2, csrf2) = signed_in(&plain, Role::Author).await;
    let form = page(&client2, plain.url("/assignments/new")).await.text().await.unwrap();
    assert!(
        !form.contains(r#"name="send_email""#)
            && form.contains("Email is not set up on this server"),
        "{form}"
    );
    let r = invite(&plain, &client2, &csrf2, "", true).await;
    let html = page(&client2, plain.url(r.headers()["location"].to_str().unwrap()))
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains("was not sent") && html.contains("not set up"), "{html}");

    // A mail server that is down: the invite stands and the page says so.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let (down, _p3) = app_with(move |c| {
        c.smtp_host = Some("127.0.0.1".into());
        c.smtp_port = Some(port);
        c.smtp_from = Some("hiring@example.test".into());
        c.smtp_tls = Some("off".into());
    })
    .await;
    let (client3, csrf3) = signed_in(&down, Role::Author).await;
    let r = invite(&down, &client3, &csrf3, "", true).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let html = page(&client3, down.url(r.headers()["location"].to_str().unwrap()))
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains("was not sent") && invite_url(&html).is_some(), "{html}");
    assert_eq!(down.state.db.list_assignments(None).await.unwrap().len(), 1);
}

/// The invite flow in a real headless Chromium: the packet page's "Invite a
/// candidate", a form whose fresh required fields are not red and whose
/// packet menu shows whole names, the email going out, and the Copy button
/// on the link. Screenshots: the invite page and the email as rendered.
#[tokio::test]
async fn invite_in_a_real_browser_copy_and_email() {
    let _one = crate::webdriver::exclusive().await;
    crate::browser::require_bundle();
    let sink = SmtpSink::start().await;
    let (app, _p) = app_with(|c| sink.configure(c)).await;
    app.user("author@example.com", Role::Author, "author-password-1").await;
    let b = crate::webdriver::Browser::new(&app.base).await;
    crate::e2e::sign_in(&b, "author@example.com", "author-password-1").await;
    b.goto("/packets/null-status").await;
    b.click("a.button.invite").await;
    b.wait_path("/assignments/new?packet=null-status").await;
    b.wait("form.invite-form").await;
    let looks = b
        .script(
            "const bad = getComputedStyle(document.querySelector('select[name=packet]')).borderColor;
             const req = [...document.querySelectorAll('form.invite-form [required]')];
             const name = document.querySelector('input[name=candidate_name]');
             const sel = document.querySelector('select[name=packet]');
             const ctx = document.createElement('canvas').getContext('2d');
             ctx.font = getComputedStyle(sel).font;
             const widest = Math.max(...[...sel.options].map(o => ctx.measureText(o.text).width));
             return { colors: req.map(e => getComputedStyle(e).borderColor), plain: bad,
                      empty: name.value, select: sel.getBoundingClientRect().width, widest,
                      timeBox: document.querySelector('input[name=time_box_minutes]').value };",
        )
        .await;
    assert_eq!(looks["empty"], "", "{looks}");
    for c in looks["colors"].as_array().unwrap() {
        assert_ne!(
            c.as_str().unwrap(),
            "rgb(176, 38, 29)",
            "a required field is red before any input: {looks}"
        );
    }
    assert!(
        looks["select"].as_f64().unwrap() >= looks["widest"].as_f64().unwrap() + 16.0,
        "the packet menu cuts its names off: {looks}"
    );
    assert_eq!(looks["timeBox"], "90", "{looks}");

    b.fill("input[name='candidate_name']", "Ada Candidate").await;
    b.fill("input[name='email']", "ada@example.test").await;
    b.script("document.querySelector(\"input[name='deadline']\").value = '2099-01-01T12:00';")
        .await;
    b.click("form.invite-form button[type='submit']").await;
    b.wait_path("/assignments/").await;
    let url = b.find("input#invite-url").await.prop("value").await.unwrap().expect("the link");
    assert!(b.text(".mail-sent").await.contains("Emailed the link to ada@example.test"));
    b.wait("#copy-link[data-hydrated='true']").await;
    b.click("#copy-link").await;
    b.wait("#copy-link[data-copied]").await;
    let said = b.text("#copy-link").await;
    assert!(said == "Copied" || said.starts_with("Selected"), "{said}");
    let selected = b.script("const i = document.getElementById('invite-url'); return i.value.substring(i.selectionStart, i.selectionEnd);").await;
    assert_eq!(selected.as_str().unwrap(), url, "the link is selected for copying");
    assert!(!b.exists("details.reissue[open]").await, "reissue is folded away");
    b.snapshot("invite-page").await;

    let taken = sink.taken();
    assert_eq!(taken.len(), 1);
    let html = taken[0].part("text/html").unwrap();
    assert!(html.contains(&url));
    let shots = std::env::var_os("GATEHOUSE_SCREENSHOTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| crate::support::repo_root().join("target/screenshots"));
    std::fs::create_dir_all(&shots).unwrap();
    let file = shots.join("invite-email.html");
    std::fs::write(&file, &html).unwrap();
    b.goto(&format!("file://{}", file.canonicalize().unwrap().display())).await;
    b.wait("a[href]").await;
    b.snapshot("invite-email").await;
    b.close().await;
}
