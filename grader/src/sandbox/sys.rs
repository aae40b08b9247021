//! The system-call helpers every part of the sandbox shares: errors that
//! name the call, C strings of paths, where the staging folders live.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::SandboxError;

/// Where the per-run staging directories live on the host (mode 0700).
pub const STAGING_BASE: &str = "/tmp/gatehouse-sandbox";

pub(super) fn os_err(call: impl Into<String>) -> SandboxError {
    SandboxError { call: call.into(), detail: std::io::Error::last_os_error().to_string() }
}

pub(super) fn io_err(call: impl Into<String>, e: std::io::Error) -> SandboxError {
    SandboxError { call: call.into(), detail: e.to_string() }
}

pub(super) fn cstr(p: impl AsRef<[u8]>) -> Result<CString, SandboxError> {
    CString::new(p.as_ref().to_vec()).map_err(|e| SandboxError {
        call: format!("CString::new({:?})", String::from_utf8_lossy(p.as_ref())),
        detail: e.to_string(),
    })
}

pub(super) fn cpath(p: &Path) -> Result<CString, SandboxError> {
    cstr(p.as_os_str().as_bytes())
}

pub(super) fn errno_name(e: i32) -> String {
    let name = nix::errno::Errno::from_raw(e);
    format!("{name:?}: {}", std::io::Error::from_raw_os_error(e))
}
