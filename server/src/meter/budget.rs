//! The packet's caps against what an assignment used: which cap refuses a
//! call, and what is left of each for the candidate page.

pub use app::contract::CapUse;
use grader::manifest::Budgets;
use serde_json::json;

use crate::db::MeterUsage;
use crate::error::AppError;

/// The cap that refuses a call, with the figures the error names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub cap: &'static str,
    pub limit: i64,
    pub used: i64,
    pub message: String,
}

/// Which cap, if any, refuses a call of `request_bytes` after `usage`:
/// the (limit+1)th call; any call once the tokens used reach the limit;
/// a request that would take the request bytes past their cap.
pub fn check(b: &Budgets, usage: MeterUsage, request_bytes: i64) -> Option<Refused> {
    if let Some(limit) = b.model_calls.map(|v| v as i64)
        && usage.calls >= limit
    {
        return Some(Refused {
            cap: "model_calls",
            limit,
            used: usage.calls,
            message: format!("the budget of {limit} model calls is used up"),
        });
    }
    if let Some(limit) = b.tokens.map(|v| v as i64)
        && usage.tokens >= limit
    {
        return Some(Refused {
            cap: "tokens",
            limit,
            used: usage.tokens,
            message: format!("the budget of {limit} tokens is used up ({} used)", usage.tokens),
        });
    }
    if let Some(limit) = b.request_bytes.map(|v| v as i64)
        && usage.request_bytes + request_bytes > limit
    {
        return Some(Refused {
            cap: "request_bytes",
            limit,
            used: usage.request_bytes,
            message: format!(
                "this request of {request_bytes} bytes would take the request bytes past their budget of {limit} ({} used)",
                usage.request_bytes
            ),
        });
    }
    None
}

/// The 429 answer naming the cap.
pub fn exceeded(cap: &str, limit: i64, used: i64, message: String) -> AppError {
    AppError::TooManyRequests(message)
        .coded("budget_exceeded")
        .with_fields(json!({ "cap": cap, "limit": limit, "used": used }))
}

/// Every cap the packet sets, with what is used and left. The time box
/// counts minutes since the assignment started (`elapsed_min`).
pub fn caps_of(
    b: &Budgets,
    usage: MeterUsage,
    time_box_min: Option<i64>,
    elapsed_min: Option<i64>,
) -> Vec<CapUse> {
    let mut out = Vec::new();
    let mut push = |cap: &str, limit: Option<i64>, used: i64| {
        if let Some(limit) = limit {
            out.push(CapUse { cap: cap.to_string(), limit, used, left: (limit - used).max(0) });
        }
    };
    push("model_calls", b.model_calls.map(|v| v as i64), usage.calls);
    push("tokens", b.tokens.map(|v| v as i64), usage.tokens);
    push("request_bytes", b.request_bytes.map(|v| v as i64), usage.request_bytes);
    push("time_box_minutes", time_box_min, elapsed_min.unwrap_or(0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_refuse_exactly_past_the_limit() {
        let b = Budgets {
            model_calls: Some(2),
            tokens: Some(100),
            request_bytes: Some(50),
            ..Budgets::default()
        };
        let u = |calls, tokens, request_bytes| MeterUsage {
            calls,
            tokens,
            request_bytes,
            transcript_bytes: 0,
        };
        assert_eq!(check(&b, u(1, 0, 0), 10), None);
        assert_eq!(check(&b, u(2, 0, 0), 10).unwrap().cap, "model_calls");
        assert_eq!(check(&b, u(0, 99, 0), 10), None);
        assert_eq!(check(&b, u(0, 100, 0), 10).unwrap().cap, "tokens");
        assert_eq!(check(&b, u(0, 0, 40), 10), None);
        assert_eq!(check(&b, u(0, 0, 40), 11).unwrap().cap, "request_bytes");
    }
}
