//! Calls a stopped server left in flight, settled at the next start.

use crate::error::AppError;
use crate::now_ms;
use crate::state::AppState;

/// Settles the calls an earlier run of the server left in flight (it
/// stopped before their upstream answered): each is finished with status
/// 499 and an error saying so, and charged its prompt estimate, so its
/// reservation neither blocks the candidate nor frees tokens the upstream
/// may have spent reading the prompt. Run once at start, before any call
/// is admitted. Returns how many were settled.
pub async fn settle_interrupted(state: &AppState) -> Result<usize, AppError> {
    let mut n = 0;
    for c in state.db.pending_model_calls().await? {
        // A call in flight holds its prompt estimate in prompt_tokens.
        let prompt = c.prompt_tokens.min(c.reserved_tokens);
        // Its transcript charge was the request kept plus the room reserved
        // for the response; no response was kept, so only the request's
        // bytes stay charged (none when its blob never reached the disk).
        let request_kept = match &c.request_body_sha256 {
            Some(sha) => kept_blob_bytes(state, sha).await,
            None => 0,
        };
        let outcome = crate::db::meter::ModelCallOutcome {
            status: 499,
            response_bytes: 0,
            prompt_tokens: prompt,
            completion_tokens: 0,
            tokens_estimated: true,
            latency_ms: (now_ms() - c.at).max(0),
            error: Some("the server stopped before the upstream answered; the call is charged its prompt estimate".into()),
            counted: true,
            // No response was kept: the room reserved for it is released.
            response_body_sha256: None,
            transcript_cut: Some("response not kept: the server stopped before the upstream answered".into()),
            transcript_bytes: Some(request_kept.min(c.transcript_bytes)),
        };
        if state.db.finish_model_call(c.id, outcome).await? {
            n += 1;
        }
    }
    if n > 0 {
        tracing::warn!(settled = n, "settled model calls an earlier run left in flight");
    }
    Ok(n)
}

/// The size of a kept transcript body: its local file, else (Postgres)
/// the database's row; 0 when it is stored nowhere.
async fn kept_blob_bytes(state: &AppState, sha256: &str) -> i64 {
    let path = crate::blobs::blob_path(&state.config.data_dir, sha256);
    if let Ok(meta) = tokio::fs::metadata(&path).await {
        return meta.len() as i64;
    }
    match state.db.blob_meta(sha256).await {
        Ok(Some((size, _))) => size,
        _ => 0,
    }
}
