//! Invite emails: a plain-text and an HTML part with the link, the deadline
//! and the time box, sent over SMTP (`GATEHOUSE_SMTP_*`) with `lettre`.
//!
//! The link is a secret: it is put in the message and nowhere else (not in
//! logs, not in the audit row, not in an error).

use std::time::Duration;

use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use crate::config::Config;

/// How long one SMTP exchange may take before the send is given up.
const SMTP_TIMEOUT: Duration = Duration::from_secs(20);

/// What an invite email says.
pub struct InviteMail<'a> {
    pub candidate_name: &'a str,
    pub email: &'a str,
    pub packet_title: &'a str,
    pub url: &'a str,
    /// "2026-12-08 17:00 UTC".
    pub deadline: &'a str,
    /// "90 min", when a time box applies.
    pub time_box: Option<&'a str>,
    pub max_submissions: i64,
}

/// Why a mail was not sent, as a sentence for the author.
#[derive(Debug, thiserror::Error)]
pub enum MailError {
    #[error("email is not set up on this server (GATEHOUSE_SMTP_HOST and GATEHOUSE_SMTP_FROM)")]
    NotConfigured,
    #[error("the mail settings are invalid: {0}")]
    Settings(String),
    #[error("{0:?} is not an email address the mail can be sent to")]
    Recipient(String),
    #[error("the SMTP server did not take the message: {0}")]
    Smtp(String),
}

/// Whether invite emails can be sent (a host and a sender are set).
pub fn configured(config: &Config) -> bool {
    config.smtp_host.as_deref().is_some_and(|h| !h.trim().is_empty())
        && config.smtp_from.as_deref().is_some_and(|f| !f.trim().is_empty())
}

/// How the SMTP connection is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tls {
    StartTls,
    Tls,
    Off,
}

pub fn tls_mode(config: &Config) -> Result<Tls, MailError> {
    match config
        .smtp_tls
        .as_deref()
        .map(str::trim)
        .unwrap_or("starttls")
        .to_ascii_lowercase()
        .as_str()
    {
        "" | "starttls" => Ok(Tls::StartTls),
        "tls" | "implicit" => Ok(Tls::Tls),
        "off" | "none" | "plain" => Ok(Tls::Off),
        other => Err(MailError::Settings(format!(
            "GATEHOUSE_SMTP_TLS {other:?} is not starttls, tls or off"
        ))),
    }
}

/// The message: `multipart/alternative` with a text and an HTML part.
pub fn invite_message(config: &Config, mail: &InviteMail<'_>) -> Result<Message, MailError> {
    let from: Mailbox = config
        .smtp_from
        .as_deref()
        .ok_or(MailError::NotConfigured)?
        .trim()
        .parse()
        .map_err(|e| MailError::Settings(format!("GATEHOUSE_SMTP_FROM: {e}")))?;
    let to = Mailbox::new(
        Some(one_line(mail.candidate_name)),
        mail.email.trim().parse().map_err(|_| MailError::Recipient(mail.email.to_string()))?,
    );
    let (text, html) = invite_bodies(mail);
    Message::builder()
        .from(from)
        .to(to)
        .subject(format!("Your take-home: {}", one_line(mail.packet_title)))
        .multipart(MultiPart::alternative_plain_html(text, html))
        .map_err(|e| MailError::Settings(e.to_string()))
}

/// Header values stay on one line, whatever a name holds.
fn one_line(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect::<String>().trim().to_string()
}

/// The plain-text and the HTML body.
pub fn invite_bodies(mail: &InviteMail<'_>) -> (String, String) {
    let time_box_text = match mail.time_box {
        Some(t) => format!("Time box: {t}, counted from when you first open the link and start.\n"),
        None => "Time box: none; work at your own pace until the deadline.\n".to_string(),
    };
    let text = format!(
        "Hello {name},\n\n\
         You are invited to a take-home exercise: {packet}.\n\n\
         Open this link to read the brief, download the starter files and submit your work:\n\
         {url}\n\n\
         Deadline: {deadline}\n\
         {time_box_text}\
         Submissions accepted: {max}\n\n\
         The link is personal: do not share it. No account is needed.\n",
        name = one_line(mail.candidate_name),
        packet = one_line(mail.packet_title),
        url = mail.url,
        deadline = mail.deadline,
        max = mail.max_submissions,
    );
    let e = |s: &str| escape(s);
    let time_box_html = match mail.time_box {
        Some(t) => format!("{}, counted from when you first open the link and start", e(t)),
        None => "none; work at your own pace until the deadline".to_string(),
    };
    let html = format!(
        "<!doctype html>\n<html><body style=\"font-family: system-ui, sans-serif; line-height: 1.5\">\n\
         <p>Hello {name},</p>\n\
         <p>You are invited to a take-home exercise: <strong>{packet}</strong>.</p>\n\
         <p><a href=\"{url}\">Open the exercise</a> to read the brief, download the starter files and submit your work.</p>\n\
         <table>\n<tr><th align=\"left\">Deadline</th><td>{deadline}</td></tr>\n\
         <tr><th align=\"left\">Time box</th><td>{time_box_html}</td></tr>\n\
         <tr><th align=\"left\">Submissions accepted</th><td>{max}</td></tr>\n</table>\n\
         <p>If the button does not work, copy this address into your browser:<br><code>{url}</code></p>\n\
         <p>The link is personal: do not share it. No account is needed.</p>\n\
         </body></html>\n",
        name = e(mail.candidate_name),
        packet = e(mail.packet_title),
        url = e(mail.url),
        deadline = e(mail.deadline),
        max = mail.max_submissions,
    );
    (text, html)
}

use app::text::escape_html as escape;

/// Sends the invite through the configured SMTP server.
pub async fn send_invite(config: &Config, mail: &InviteMail<'_>) -> Result<(), MailError> {
    if !configured(config) {
        return Err(MailError::NotConfigured);
    }
    let message = invite_message(config, mail)?;
    let host = config.smtp_host.as_deref().unwrap_or_default().trim().to_string();
    let tls = tls_mode(config)?;
    let builder = match tls {
        Tls::Off => AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&host),
        Tls::StartTls => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&host)
            .map_err(|e| MailError::Settings(e.to_string()))?,
        Tls::Tls => AsyncSmtpTransport::<Tokio1Executor>::relay(&host)
            .map_err(|e| MailError::Settings(e.to_string()))?,
    };
    let port = config.smtp_port.unwrap_or(match tls {
        Tls::StartTls => 587,
        Tls::Tls => 465,
        Tls::Off => 25,
    });
    let mut builder = builder.port(port).timeout(Some(SMTP_TIMEOUT));
    if let Some(user) = config.smtp_user.as_deref().filter(|u| !u.is_empty()) {
        builder = builder.credentials(Credentials::new(
            user.to_string(),
            config.smtp_password.clone().unwrap_or_default(),
        ));
    }
    let transport = builder.build();
    transport.send(message).await.map_err(|e| MailError::Smtp(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mail<'a>(name: &'a str, time_box: Option<&'a str>) -> InviteMail<'a> {
        InviteMail {
            candidate_name: name,
            email: "ada@example.com",
            packet_title: "Null status <triage>",
            url: "http://127.0.0.1:8080/c/abc",
            deadline: "2099-01-01 12:00 UTC",
            time_box,
            max_submissions: 3,
        }
    }

    #[test]
    fn bodies_name_the_link_deadline_and_time_box_and_escape_html() {
        let (text, html) = invite_bodies(&mail("Ada <b>", Some("90 min")));
        for want in [
            "http://127.0.0.1:8080/c/abc",
            "2099-01-01 12:00 UTC",
            "Time box: 90 min",
            "Submissions accepted: 3",
            "Null status <triage>",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        assert!(
            html.contains("Ada &lt;b&gt;")
                && html.contains("Null status &lt;triage&gt;")
                && !html.contains("<b>"),
            "{html}"
        );
        assert!(
            html.contains("href=\"http://127.0.0.1:8080/c/abc\"") && html.contains("90 min"),
            "{html}"
        );
        let (text, _) = invite_bodies(&mail("Ada", None));
        assert!(text.contains("Time box: none"), "{text}");
    }

    #[test]
    fn settings_are_checked() {
        let mut c = Config::default();
        assert!(!configured(&c));
        c.smtp_host = Some("127.0.0.1".into());
        c.smtp_from = Some("Gatehouse <hiring@example.com>".into());
        assert!(configured(&c));
        assert_eq!(tls_mode(&c).unwrap(), Tls::StartTls);
        c.smtp_tls = Some("OFF".into());
        assert_eq!(tls_mode(&c).unwrap(), Tls::Off);
        c.smtp_tls = Some("maybe".into());
        assert!(tls_mode(&c).is_err());
        assert!(invite_message(&c, &mail("Ada\r\nBcc: x@example.com", None)).is_ok());
        let bad = InviteMail { email: "not an address", ..mail("Ada", None) };
        assert!(matches!(invite_message(&c, &bad), Err(MailError::Recipient(_))));
    }
}
