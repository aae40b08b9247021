//! [`Root`]: a folder opened once, with every read, write, removal, copy
//! and listing beneath it done relative to that directory handle, so no
//! path can leave it. Paths are relative (`/` separators, no `..`, `.` or
//! empty parts, no backslash or NUL), and no symbolic link is followed,
//! neither as the last part nor on the way: with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`, or, on a kernel without
//! `openat2` (ENOSYS), one `openat(O_NOFOLLOW)` per part from the handle.
//! A folder swapped for a link between a check and a use is therefore
//! refused at the use, not followed. A leaf.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// A relative path with `/` separators, no `..`, `.` or empty components.
pub fn is_safe_relative(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

/// [`is_safe_relative`], and no backslash or NUL (a backslash is a
/// separator on some systems and never in a packet's paths).
pub fn is_safe_path(p: &str) -> bool {
    is_safe_relative(p) && !p.contains('\\') && !p.contains('\0')
}

/// What an entry beneath a root is (links are never followed, so a link is
/// `Other`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Other,
}

/// Set once `openat2` answered ENOSYS: the per-part walk is used from then on.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// A folder held open (`O_PATH | O_DIRECTORY`); see the module docs.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    path: PathBuf,
    /// Resolve by the per-part `openat` walk even where `openat2` exists
    /// (what a kernel without it gets; tests use both).
    walk: bool,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| invalid(format!("{s:?} contains a NUL byte")))
}

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc) }
}

fn owned(rc: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: a non-negative return of open/openat is a fresh descriptor we own.
    cvt(rc).map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)` for one part.
fn openat1(dir: RawFd, name: &str, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
    let c = cstr(name)?;
    // SAFETY: `c` is a valid C string; the descriptor is checked by `owned`.
    owned(unsafe {
        libc::openat(
            dir,
            c.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    })
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`; `None` when nothing is there.
fn stat1(dir: RawFd, name: &str) -> io::Result<Option<Kind>> {
    let c = cstr(name)?;
    // SAFETY: zeroed `stat` is a valid out-buffer; `c` is a valid C string.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let rc = unsafe { libc::fstatat(dir, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::ENOENT) { Ok(None) } else { Err(e) };
    }
    Ok(Some(kind_of(st.st_mode)))
}

fn kind_of(mode: libc::mode_t) -> Kind {
    match mode & libc::S_IFMT {
        libc::S_IFREG => Kind::File,
        libc::S_IFDIR => Kind::Dir,
        _ => Kind::Other,
    }
}

fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: zeroed `stat` is a valid out-buffer for fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    cvt(unsafe { libc::fstat(fd, &mut st) })?;
    Ok(st)
}

/// Names in the folder `dir` (not `.` or `..`), sorted.
fn names(dir: RawFd) -> io::Result<Vec<String>> {
    let fd = openat1(dir, ".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    // SAFETY: `fd` is an open directory; fdopendir takes it over (closedir closes it).
    let d = unsafe { libc::fdopendir(fd.as_raw_fd()) };
    if d.is_null() {
        return Err(io::Error::last_os_error());
    }
    std::mem::forget(fd);
    let mut out = Vec::new();
    loop {
        // SAFETY: `d` is a valid DIR* until closedir below.
        let ent = unsafe { libc::readdir64(d) };
        if ent.is_null() {
            break;
        }
        // SAFETY: readdir returns a valid entry whose d_name is NUL-terminated.
        let name = unsafe { std::ffi::CStr::from_ptr((*ent).d_name.as_ptr()) };
        let name = name.to_bytes();
        if name != b"." && name != b".." {
            out.push(String::from_utf8_lossy(name).into_owned());
        }
    }
    // SAFETY: `d` came from fdopendir and is closed once.
    unsafe { libc::closedir(d) };
    out.sort();
    Ok(out)
}

/// Removes `name` from `dir`: a folder recursively, without following any
/// link (a link is removed itself). Whether something was there.
fn remove_entry(dir: RawFd, name: &str) -> io::Result<bool> {
    let Some(kind) = stat1(dir, name)? else { return Ok(false) };
    let c = cstr(name)?;
    if kind == Kind::Dir {
        let sub = openat1(dir, name, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        for n in names(sub.as_raw_fd())? {
            remove_entry(sub.as_raw_fd(), &n)?;
        }
        // SAFETY: `c` is a valid C string.
        cvt(unsafe { libc::unlinkat(dir, c.as_ptr(), libc::AT_REMOVEDIR) })?;
    } else {
        // SAFETY: `c` is a valid C string.
        cvt(unsafe { libc::unlinkat(dir, c.as_ptr(), 0) })?;
    }
    Ok(true)
}

/// `rel` split into its parent (`""` for the root) and last part.
fn split(rel: &str) -> (&str, &str) {
    rel.rsplit_once('/').unwrap_or(("", rel))
}

fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}/{b}"),
    }
}

impl Root {
    /// Opens the folder `path` (a path the grader chose, not one from a
    /// packet or submission; its last part may not be a link).
    pub fn open(path: &Path) -> io::Result<Root> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| invalid(format!("{} contains a NUL byte", path.display())))?;
        // SAFETY: `c` is a valid C string; the descriptor is checked by `owned`.
        let fd = owned(unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        })
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("{}: {e} (a root must be a folder, not a link)", path.display()),
            )
        })?;
        Ok(Root { fd, path: path.to_path_buf(), walk: false })
    }

    /// Creates the folder `path` (and its parents) if needed and opens it.
    pub fn create(path: &Path) -> io::Result<Root> {
        std::fs::create_dir_all(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        Root::open(path)
    }

    /// This root resolving by the per-part `openat(O_NOFOLLOW)` walk, as on
    /// a kernel without `openat2`.
    #[doc(hidden)]
    pub fn walking(self) -> Root {
        Root { walk: true, ..self }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, rel: &str, e: io::Error) -> io::Error {
        let why = match e.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::EXDEV) => {
                " (a symbolic link is in the way; links are never followed)".to_string()
            }
            Some(libc::ENOTDIR) => {
                " (a part of it is not a folder, or is a symbolic link; links are never followed)"
                    .to_string()
            }
            _ => String::new(),
        };
        io::Error::new(e.kind(), format!("{rel:?} beneath {}: {e}{why}", self.path.display()))
    }

    /// Opens `rel` beneath the root with `flags` (O_CLOEXEC added); `""`
    /// is the root itself. A link anywhere on the way is refused.
    fn open_at(&self, rel: &str, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
        if rel.is_empty() {
            return openat1(self.fd.as_raw_fd(), ".", flags, mode).map_err(|e| self.err(rel, e));
        }
        if !is_safe_path(rel) {
            return Err(invalid(format!(
                "{rel:?} is not a safe relative path (absolute, `..`, `.` or empty parts, backslash or NUL)"
            )));
        }
        if !self.walk && !NO_OPENAT2.load(Ordering::Relaxed) {
            let c = cstr(rel)?;
            let how = OpenHow {
                flags: (flags | libc::O_CLOEXEC) as u64,
                mode: mode as u64,
                resolve: libc::RESOLVE_BENEATH
                    | libc::RESOLVE_NO_SYMLINKS
                    | libc::RESOLVE_NO_MAGICLINKS,
            };
            // SAFETY: `c` and `how` outlive the call; the size is `how`'s.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_openat2,
                    self.fd.as_raw_fd(),
                    c.as_ptr(),
                    &how as *const OpenHow,
                    std::mem::size_of::<OpenHow>(),
                )
            };
            match owned(rc as libc::c_int) {
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed)
                }
                r => return r.map_err(|e| self.err(rel, e)),
            }
        }
        self.walk_open(rel, flags, mode).map_err(|e| self.err(rel, e))
    }

    fn walk_open(&self, rel: &str, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
        let (parent, last) = split(rel);
        let mut dir = openat1(self.fd.as_raw_fd(), ".", libc::O_PATH | libc::O_DIRECTORY, 0)?;
        if !parent.is_empty() {
            for part in parent.split('/') {
                // O_DIRECTORY with O_NOFOLLOW: a link here is ENOTDIR.
                dir = openat1(dir.as_raw_fd(), part, libc::O_PATH | libc::O_DIRECTORY, 0)?;
            }
        }
        let fd = openat1(dir.as_raw_fd(), last, flags, mode)?;
        // O_PATH | O_NOFOLLOW opens a link itself: refuse it like openat2 does.
        if (flags & libc::O_PATH) != 0
            && fstat(fd.as_raw_fd())?.st_mode & libc::S_IFMT == libc::S_IFLNK
        {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        Ok(fd)
    }

    /// The folder `rel` (`""`: the root) held open for `*at` calls.
    fn dir(&self, rel: &str) -> io::Result<OwnedFd> {
        self.open_at(rel, libc::O_PATH | libc::O_DIRECTORY, 0)
    }

    /// What is at `rel`, `None` when nothing is; a link on the way is an error.
    pub fn kind(&self, rel: &str) -> io::Result<Option<Kind>> {
        if !is_safe_path(rel) {
            return Err(invalid(format!(
                "{rel:?} is not a safe relative path (absolute, `..`, `.` or empty parts, backslash or NUL)"
            )));
        }
        let (parent, last) = split(rel);
        match self.dir(parent) {
            Ok(d) => stat1(d.as_raw_fd(), last).map_err(|e| self.err(rel, e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub fn is_file(&self, rel: &str) -> bool {
        matches!(self.kind(rel), Ok(Some(Kind::File)))
    }

    pub fn is_dir(&self, rel: &str) -> bool {
        matches!(self.kind(rel), Ok(Some(Kind::Dir)))
    }

    /// The bytes of the regular file `rel`.
    pub fn read(&self, rel: &str) -> io::Result<Vec<u8>> {
        let (file, _) = self.open_file(rel)?;
        let mut out = Vec::new();
        file.take(u64::MAX).read_to_end(&mut out).map_err(|e| self.err(rel, e))?;
        Ok(out)
    }

    /// The bytes of the regular file `rel` if it holds at most `cap` bytes.
    pub fn read_max(&self, rel: &str, cap: u64) -> io::Result<Vec<u8>> {
        let (file, _) = self.open_file(rel)?;
        let len = file.metadata().map_err(|e| self.err(rel, e))?.len();
        if len > cap {
            return Err(invalid(format!(
                "{rel:?} beneath {}: {len} bytes, more than the {cap} read",
                self.path.display()
            )));
        }
        let mut out = Vec::new();
        file.take(cap).read_to_end(&mut out).map_err(|e| self.err(rel, e))?;
        Ok(out)
    }

    pub fn read_to_string(&self, rel: &str) -> io::Result<String> {
        String::from_utf8(self.read(rel)?).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{rel:?} beneath {}: not UTF-8", self.path.display()),
            )
        })
    }

    /// Opens the regular file `rel` for reading (never a FIFO or device:
    /// `O_NONBLOCK`, then its type checked), with its permission bits.
    fn open_file(&self, rel: &str) -> io::Result<(File, u32)> {
        let fd = self.open_at(rel, libc::O_RDONLY | libc::O_NONBLOCK, 0)?;
        let st = fstat(fd.as_raw_fd()).map_err(|e| self.err(rel, e))?;
        if kind_of(st.st_mode) != Kind::File {
            return Err(invalid(format!(
                "{rel:?} beneath {}: not a regular file",
                self.path.display()
            )));
        }
        Ok((File::from(fd), st.st_mode & 0o777))
    }

    /// Creates the folder `rel` and its parents (`""`: the root), refusing
    /// a link or file in the way; the folder held open.
    fn make_dirs(&self, rel: &str) -> io::Result<OwnedFd> {
        let mut dir = self.dir("")?;
        if rel.is_empty() {
            return Ok(dir);
        }
        if !is_safe_path(rel) {
            return Err(invalid(format!(
                "{rel:?} is not a safe relative path (absolute, `..`, `.` or empty parts, backslash or NUL)"
            )));
        }
        for part in rel.split('/') {
            let c = cstr(part)?;
            // SAFETY: `c` is a valid C string.
            let rc = unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o777) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(self.err(rel, e));
                }
            }
            dir = openat1(dir.as_raw_fd(), part, libc::O_PATH | libc::O_DIRECTORY, 0)
                .map_err(|e| self.err(rel, e))?;
        }
        Ok(dir)
    }

    /// Writes `bytes` to `rel`, creating parent folders and replacing what
    /// is there (a link in the way is replaced, never written through).
    pub fn write(&self, rel: &str, bytes: &[u8]) -> io::Result<()> {
        self.write_mode(rel, bytes, None)
    }

    /// [`Root::write`]; with `mode`, the file gets exactly those permission
    /// bits (as `fs::copy` keeps them), else 0o666 less the umask.
    fn write_mode(&self, rel: &str, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
        if !is_safe_path(rel) {
            return Err(invalid(format!(
                "{rel:?} is not a safe relative path (absolute, `..`, `.` or empty parts, backslash or NUL)"
            )));
        }
        let (parent, last) = split(rel);
        let dir = self
            .make_dirs(parent)
            .map_err(|e| io::Error::new(e.kind(), format!("writing {rel:?}: {e}")))?;
        remove_entry(dir.as_raw_fd(), last).map_err(|e| self.err(rel, e))?;
        let fd =
            openat1(dir.as_raw_fd(), last, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o666)
                .map_err(|e| self.err(rel, e))?;
        let mut f = File::from(fd);
        f.write_all(bytes).map_err(|e| self.err(rel, e))?;
        if let Some(mode) = mode {
            // SAFETY: `f` is an open file we own.
            cvt(unsafe { libc::fchmod(f.as_raw_fd(), mode as libc::mode_t) })
                .map_err(|e| self.err(rel, e))?;
        }
        Ok(())
    }

    /// Removes `rel` where it exists: a folder recursively, a link itself
    /// (nothing is removed through a link). Whether something was there.
    pub fn remove(&self, rel: &str) -> io::Result<bool> {
        if !is_safe_path(rel) {
            return Err(invalid(format!(
                "{rel:?} is not a safe relative path (absolute, `..`, `.` or empty parts, backslash or NUL)"
            )));
        }
        let (parent, last) = split(rel);
        let dir = match self.dir(parent) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        remove_entry(dir.as_raw_fd(), last).map_err(|e| self.err(rel, e))
    }

    /// Names and kinds of the entries of the folder `rel` (`""`: the
    /// root), sorted by name.
    pub fn entries(&self, rel: &str) -> io::Result<Vec<(String, Kind)>> {
        let dir = self.dir(rel)?;
        let mut out = Vec::new();
        for n in names(dir.as_raw_fd()).map_err(|e| self.err(rel, e))? {
            if let Some(k) = stat1(dir.as_raw_fd(), &n).map_err(|e| self.err(rel, e))? {
                out.push((n, k));
            }
        }
        Ok(out)
    }

    /// The regular files beneath the folder `rel` (`""`: the root),
    /// relative to it, sorted; links and other entries are left out and
    /// not followed.
    pub fn files(&self, rel: &str) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        self.files_into(rel, "", &mut out)?;
        out.sort();
        Ok(out)
    }

    fn files_into(&self, base: &str, sub: &str, out: &mut Vec<String>) -> io::Result<()> {
        for (name, kind) in self.entries(&join(base, sub))? {
            match kind {
                Kind::File => out.push(join(sub, &name)),
                Kind::Dir => self.files_into(base, &join(sub, &name), out)?,
                Kind::Other => {}
            }
        }
        Ok(())
    }

    /// Copies the file or folder `from` (`""`: the whole root) to `to_rel`
    /// beneath `to` (`""`: its root): regular files and folders only,
    /// permission bits kept, files in the way replaced, links neither
    /// copied nor followed.
    pub fn copy(&self, from: &str, to: &Root, to_rel: &str) -> io::Result<()> {
        let kind = if from.is_empty() { Some(Kind::Dir) } else { self.kind(from)? };
        match kind {
            Some(Kind::File) => {
                if to_rel.is_empty() {
                    return Err(invalid(format!(
                        "{from:?}: a file cannot replace the root {}",
                        to.path.display()
                    )));
                }
                let (mut file, mode) = self.open_file(from)?;
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes).map_err(|e| self.err(from, e))?;
                to.write_mode(to_rel, &bytes, Some(mode))
            }
            Some(Kind::Dir) => {
                if !to_rel.is_empty() && to.kind(to_rel)?.is_some_and(|k| k != Kind::Dir) {
                    to.remove(to_rel)?;
                }
                to.make_dirs(to_rel)?;
                for (name, kind) in self.entries(from)? {
                    if kind != Kind::Other {
                        self.copy(&join(from, &name), to, &join(to_rel, &name))?;
                    }
                }
                Ok(())
            }
            Some(Kind::Other) => Err(invalid(format!(
                "{from:?} beneath {}: neither a file nor a folder (links are never followed)",
                self.path.display()
            ))),
            None => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{from:?} beneath {}: does not exist", self.path.display()),
            )),
        }
    }

    /// The folder `rel` as a root of its own.
    pub fn sub(&self, rel: &str) -> io::Result<Root> {
        let fd = self.dir(rel)?;
        Ok(Root { fd, path: self.path.join(rel), walk: self.walk })
    }
}
