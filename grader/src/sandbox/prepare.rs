//! A run's filesystem and context, prepared before the clone: the staging
//! area on the host (the workspace and evidence tmpfs), the plan of mounts
//! and files init carries out, and the command's argv, environment and
//! rlimits.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use super::child::{self, ChildCtx, CmdCtx, HostCmd, Op};
use super::sys::STAGING_BASE;
use super::sys::{cpath, cstr, io_err, os_err};
use super::{RunSpec, Sandbox, SandboxError};

/// Mounts a size- and inode-capped tmpfs (`data`) on `target`.
fn mount_tmpfs(target: &Path, data: &str) -> Result<(), SandboxError> {
    let t = cpath(target)?;
    let (src, fstype, cdata) = (cstr("tmpfs")?, cstr("tmpfs")?, cstr(data)?);
    // SAFETY: all pointers are live CStrings.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            t.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            cdata.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(os_err(format!(
            "mount(\"tmpfs\", {:?}, \"tmpfs\", MS_NOSUID|MS_NODEV, {data:?})",
            target.display()
        )));
    }
    Ok(())
}

/// The per-run staging area on the host; unmounted and removed on drop.
pub(super) struct Staging {
    pub(super) dir: PathBuf,
    pub(super) root: PathBuf,
    pub(super) ws: PathBuf,
    pub(super) ws_mounted: bool,
    /// The evidence tmpfs, bound at `/evidence`.
    pub(super) ev: PathBuf,
    pub(super) ev_mounted: bool,
}

impl Staging {
    /// `ws` and `ev`: the owner and mode of the workspace's and the
    /// evidence folder's tmpfs roots, `(uid, gid, mode)`.
    pub(super) fn create(
        id: &str,
        disk_bytes: u64,
        ws_owner: (u32, u32, u32),
        ev_owner: (u32, u32, u32),
    ) -> Result<Staging, SandboxError> {
        let base = Path::new(STAGING_BASE);
        if !base.exists() {
            fs::create_dir_all(base).map_err(|e| io_err(format!("mkdir({STAGING_BASE:?})"), e))?;
        }
        fs::set_permissions(base, fs::Permissions::from_mode(0o700))
            .map_err(|e| io_err(format!("chmod({STAGING_BASE:?}, 0700)"), e))?;
        let dir = base.join(id);
        let root = dir.join("root");
        let ws = dir.join("ws");
        let ev = dir.join("ev");
        for d in [&dir, &root, &ws, &ev] {
            fs::create_dir(d).map_err(|e| io_err(format!("mkdir({:?})", d.display()), e))?;
        }
        let mut st = Staging { dir, root, ws, ws_mounted: false, ev, ev_mounted: false };
        let data = |(uid, gid, mode): (u32, u32, u32)| {
            format!(
                "size={disk_bytes},nr_inodes={},mode={mode:04o},uid={uid},gid={gid}",
                super::INODE_CAP
            )
        };
        mount_tmpfs(&st.ws, &data(ws_owner))?;
        st.ws_mounted = true;
        mount_tmpfs(&st.ev, &data(ev_owner))?;
        st.ev_mounted = true;
        Ok(st)
    }

    pub(super) fn cleanup(&mut self) -> Result<(), SandboxError> {
        for (dir, mounted) in [(&self.ws, &mut self.ws_mounted), (&self.ev, &mut self.ev_mounted)] {
            if *mounted {
                *mounted = false;
                let target = cpath(dir)?;
                // SAFETY: the target is a live CString.
                if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } != 0 {
                    return Err(os_err(format!("umount2({:?}, MNT_DETACH)", dir.display())));
                }
            }
        }
        if self.dir.exists() {
            fs::remove_dir_all(&self.dir)
                .map_err(|e| io_err(format!("rmdir({:?})", self.dir.display()), e))?;
        }
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = self.cleanup();
    }
}

/// Builds the filesystem plan and a description of each step.
struct Plan {
    ops: Vec<Op>,
    desc: Vec<String>,
    made: BTreeSet<PathBuf>,
    root: PathBuf,
}

const RO_BIND_REMOUNT: libc::c_ulong =
    libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;

impl Plan {
    fn inner(&self, p: &Path) -> PathBuf {
        let rel = p.strip_prefix("/").unwrap_or(p);
        self.root.join(rel)
    }

    fn push(&mut self, op: Op, desc: String) {
        self.ops.push(op);
        self.desc.push(desc);
    }

    fn mount(
        &mut self,
        src: Option<&str>,
        target: &Path,
        fstype: Option<&str>,
        flags: libc::c_ulong,
        flag_names: &str,
        data: Option<&str>,
    ) -> Result<(), SandboxError> {
        let desc = format!(
            "mount({}, {:?}, {}, {flag_names}, {})",
            src.map_or("NULL".to_string(), |s| format!("{s:?}")),
            target.display(),
            fstype.map_or("NULL".to_string(), |s| format!("{s:?}")),
            data.map_or("NULL".to_string(), |s| format!("{s:?}")),
        );
        let op = Op::Mount {
            src: src.map(cstr).transpose()?,
            target: cpath(target)?,
            fstype: fstype.map(cstr).transpose()?,
            flags,
            data: data.map(cstr).transpose()?,
        };
        self.push(op, desc);
        Ok(())
    }

    /// Creates `p` (a path inside the sandbox) and its missing parents.
    fn mkdirs(&mut self, p: &Path) -> Result<(), SandboxError> {
        let mut cur = PathBuf::from("/");
        for c in p.components() {
            if let Component::Normal(name) = c {
                cur.push(name);
                if self.made.insert(cur.clone()) {
                    let path = self.inner(&cur);
                    let desc = format!("mkdir({:?}, 0755)", path.display());
                    self.push(Op::Mkdir { path: cpath(&path)?, mode: 0o755 }, desc);
                }
            }
        }
        Ok(())
    }

    fn touch(&mut self, p: &Path, data: &[u8], mode: libc::mode_t) -> Result<(), SandboxError> {
        if let Some(parent) = p.parent() {
            self.mkdirs(parent)?;
        }
        let path = self.inner(p);
        let desc =
            format!("open({:?}, O_WRONLY|O_CREAT|O_TRUNC, {mode:o}) + write", path.display());
        self.push(Op::WriteFile { path: cpath(&path)?, data: data.to_vec(), mode }, desc);
        Ok(())
    }

    fn symlink(&mut self, target: &Path, link: &Path) -> Result<(), SandboxError> {
        if let Some(parent) = link.parent() {
            self.mkdirs(parent)?;
        }
        let inner = self.inner(link);
        let desc = format!("symlink({:?}, {:?})", target.display(), inner.display());
        self.push(Op::Symlink { target: cpath(target)?, link: cpath(&inner)? }, desc);
        Ok(())
    }

    /// Shows the host path `p` at the same place, read-only (symlinks are
    /// recreated, not bound).
    fn ro_bind(&mut self, p: &Path) -> Result<(), SandboxError> {
        let meta =
            fs::symlink_metadata(p).map_err(|e| io_err(format!("lstat({:?})", p.display()), e))?;
        if meta.file_type().is_symlink() {
            let target =
                fs::read_link(p).map_err(|e| io_err(format!("readlink({:?})", p.display()), e))?;
            return self.symlink(&target, p);
        }
        if meta.is_dir() {
            self.mkdirs(p)?;
        } else {
            self.touch(p, b"", 0o644)?;
        }
        let target = self.inner(p);
        let src = p.to_string_lossy().into_owned();
        self.mount(
            Some(&src),
            &target,
            None,
            libc::MS_BIND | libc::MS_REC,
            "MS_BIND|MS_REC",
            None,
        )?;
        self.mount(
            None,
            &target,
            None,
            RO_BIND_REMOUNT,
            "MS_BIND|MS_REMOUNT|MS_RDONLY|MS_NOSUID|MS_NODEV",
            None,
        )
    }
}

/// What the parent keeps of the child's descriptions.
pub(super) struct Prepared {
    pub(super) ctx: ChildCtx,
    pub(super) desc: Vec<String>,
    /// The memfd holding the encoded `CmdCtx` (`ctx.ctx_fd`).
    pub(super) _ctx_file: OwnedFd,
}

/// A close-on-exec memfd holding `bytes`.
fn memfd_with(bytes: &[u8]) -> Result<OwnedFd, SandboxError> {
    // SAFETY: a static name; the descriptor is owned below.
    let fd = unsafe { libc::memfd_create(c"gatehouse-init-ctx".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(os_err("memfd_create(\"gatehouse-init-ctx\", MFD_CLOEXEC)"));
    }
    // SAFETY: the descriptor was just created and is owned here.
    let file = fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    std::io::Write::write_all(&mut &file, bytes).map_err(|e| {
        io_err(format!("write(memfd, {} bytes of the init context)", bytes.len()), e)
    })?;
    Ok(file.into())
}

/// The ids a run's processes take: the command's uid, the one gid of the
/// run, and the host's uid in a run with a host.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ids {
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) host_uid: Option<u32>,
}

impl Sandbox {
    /// Builds the child's context: filesystem plan, argv, envp, rlimits.
    pub(super) fn prepare(
        &self,
        spec: &RunSpec,
        staging: &Staging,
        ids: Ids,
        fds: [RawFd; 5],
        cgroup_tasks: &[PathBuf],
        rlimit_names: &mut Vec<String>,
    ) -> Result<Prepared, SandboxError> {
        let lim = &spec.limits;
        let mut plan = Plan {
            ops: Vec::new(),
            desc: Vec::new(),
            made: BTreeSet::new(),
            root: staging.root.clone(),
        };
        let root = staging.root.clone();
        plan.mount(
            None,
            Path::new("/"),
            None,
            libc::MS_REC | libc::MS_PRIVATE,
            "MS_REC|MS_PRIVATE",
            None,
        )?;
        plan.mount(
            Some("tmpfs"),
            &root,
            Some("tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            "MS_NOSUID|MS_NODEV",
            Some("size=1m,nr_inodes=4096,mode=0755"),
        )?;
        let mut binds = self.config.read_only_binds.clone();
        binds.sort();
        for b in &binds {
            plan.ro_bind(b)?;
        }
        // A minimal /etc: identity files written for this run. The
        // candidate's side is "sandbox" in every kind of run: the command
        // without a host, the host with one (then the command is "judge").
        let Ids { uid, gid, host_uid } = ids;
        let users = match host_uid {
            None => format!("sandbox:x:{uid}:{gid}:sandbox:/tmp:/bin/sh\n"),
            Some(h) => format!(
                "sandbox:x:{h}:{gid}:sandbox:/tmp:/bin/sh\njudge:x:{uid}:{gid}:judge:/tmp:/bin/sh\n"
            ),
        };
        let passwd = format!(
            "root:x:0:0:root:/root:/bin/sh\n{users}nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        );
        let group = format!("root:x:0:\nsandbox:x:{gid}:\nnogroup:x:65534:\n");
        plan.touch(Path::new("/etc/passwd"), passwd.as_bytes(), 0o644)?;
        plan.touch(Path::new("/etc/group"), group.as_bytes(), 0o644)?;
        plan.touch(
            Path::new("/etc/hosts"),
            b"127.0.0.1 localhost gatehouse\n::1 localhost\n",
            0o644,
        )?;
        plan.touch(Path::new("/etc/hostname"), b"gatehouse\n", 0o644)?;
        // A minimal /dev.
        plan.mkdirs(Path::new("/dev"))?;
        for dev in ["null", "zero", "full", "random", "urandom"] {
            let host = PathBuf::from(format!("/dev/{dev}"));
            plan.touch(&host, b"", 0o644)?;
            let inner = plan.inner(&host);
            plan.mount(Some(&format!("/dev/{dev}")), &inner, None, libc::MS_BIND, "MS_BIND", None)?;
        }
        for (link, target) in [
            ("/dev/fd", "/proc/self/fd"),
            ("/dev/stdin", "/proc/self/fd/0"),
            ("/dev/stdout", "/proc/self/fd/1"),
            ("/dev/stderr", "/proc/self/fd/2"),
        ] {
            plan.symlink(Path::new(target), Path::new(link))?;
        }
        // A fresh /proc for the new PID namespace.
        plan.mkdirs(Path::new("/proc"))?;
        let proc_dir = plan.inner(Path::new("/proc"));
        // hidepid=2: the command sees only its own uid's processes (init,
        // root, is invisible: its command line, maps, fds).
        plan.mount(
            Some("proc"),
            &proc_dir,
            Some("proc"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            "MS_NOSUID|MS_NODEV|MS_NOEXEC",
            Some("hidepid=2"),
        )?;
        for m in &self.proc_masks {
            let target = proc_dir.join(m);
            plan.mount(Some("/dev/null"), &target, None, libc::MS_BIND, "MS_BIND", None)?;
        }
        // A private, size-limited /tmp.
        plan.mkdirs(Path::new("/tmp"))?;
        let tmp = plan.inner(Path::new("/tmp"));
        let tmp_data = format!("size={},nr_inodes={},mode=1777", lim.disk_bytes, super::INODE_CAP);
        plan.mount(
            Some("tmpfs"),
            &tmp,
            Some("tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            "MS_NOSUID|MS_NODEV",
            Some(&tmp_data),
        )?;
        // The workspace: the run's staging tmpfs, bound in.
        plan.mkdirs(Path::new("/workspace"))?;
        let ws = plan.inner(Path::new("/workspace"));
        let ws_src = staging.ws.to_string_lossy().into_owned();
        plan.mount(Some(&ws_src), &ws, None, libc::MS_BIND, "MS_BIND", None)?;
        plan.mount(
            None,
            &ws,
            None,
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_NOSUID | libc::MS_NODEV,
            "MS_BIND|MS_REMOUNT|MS_NOSUID|MS_NODEV",
            None,
        )?;
        // The judge's own files (a run with a host): each bound over itself
        // (the plain bind keeps the workspace's nosuid and nodev), so the
        // host, which owns the folders around it, can neither rename nor
        // remove nor replace it (a mount point is busy); their owner and
        // modes keep the host from reading them (`copy::give_to`).
        for rel in spec.host.iter().flat_map(|h| &h.judge_only) {
            let host = super::copy::checked_path(&staging.ws, rel, "HostSpec::judge_only")?;
            let src = host.to_string_lossy().into_owned();
            plan.mount(Some(&src), &ws.join(rel), None, libc::MS_BIND, "MS_BIND", None)?;
        }
        // The grader's files inside the workspace, read-only: bound over
        // themselves after the workspace, so the command can neither write
        // nor rename nor remove them (a mount point is busy).
        for rel in &spec.read_only {
            let host = super::copy::checked_path(&staging.ws, rel, "RunSpec::read_only")?;
            let target = ws.join(rel);
            let src = host.to_string_lossy().into_owned();
            plan.mount(
                Some(&src),
                &target,
                None,
                libc::MS_BIND | libc::MS_REC,
                "MS_BIND|MS_REC",
                None,
            )?;
            plan.mount(
                None,
                &target,
                None,
                RO_BIND_REMOUNT,
                "MS_BIND|MS_REMOUNT|MS_RDONLY|MS_NOSUID|MS_NODEV",
                None,
            )?;
        }
        // The evidence folder: a tmpfs of its own, outside the workspace.
        plan.mkdirs(Path::new(super::EVIDENCE_MOUNT))?;
        let ev = plan.inner(Path::new(super::EVIDENCE_MOUNT));
        let ev_src = staging.ev.to_string_lossy().into_owned();
        plan.mount(Some(&ev_src), &ev, None, libc::MS_BIND, "MS_BIND", None)?;
        plan.mount(
            None,
            &ev,
            None,
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_NOSUID | libc::MS_NODEV,
            "MS_BIND|MS_REMOUNT|MS_NOSUID|MS_NODEV",
            None,
        )?;
        // The trusted tools, read-only.
        if let Some(tools) = &self.config.tool_dir {
            let meta = fs::symlink_metadata(tools).map_err(|e| {
                io_err(format!("lstat({:?}) of SandboxConfig::tool_dir", tools.display()), e)
            })?;
            if !meta.is_dir() {
                return Err(SandboxError {
                    call: format!("lstat({:?}) of SandboxConfig::tool_dir", tools.display()),
                    detail: "the tool folder must be a directory, not a symlink or a file".into(),
                });
            }
            let inner_path = Path::new(super::TOOL_MOUNT);
            plan.mkdirs(inner_path)?;
            let target = plan.inner(inner_path);
            let src = tools.to_string_lossy().into_owned();
            plan.mount(
                Some(&src),
                &target,
                None,
                libc::MS_BIND | libc::MS_REC,
                "MS_BIND|MS_REC",
                None,
            )?;
            plan.mount(
                None,
                &target,
                None,
                RO_BIND_REMOUNT,
                "MS_BIND|MS_REMOUNT|MS_RDONLY|MS_NOSUID|MS_NODEV",
                None,
            )?;
        }
        // Switch to the new root and drop the old one.
        let rootc = cpath(&root)?;
        plan.push(Op::Chdir { path: rootc }, format!("chdir({:?})", root.display()));
        plan.push(
            Op::PivotRoot { new_root: cstr(".")?, put_old: cstr(".")? },
            "pivot_root(\".\", \".\")".into(),
        );
        plan.push(
            Op::Umount { target: cstr(".")?, flags: libc::MNT_DETACH },
            "umount2(\".\", MNT_DETACH) of the old root".into(),
        );
        plan.push(Op::Chdir { path: cstr("/")? }, "chdir(\"/\")".into());
        plan.mount(
            None,
            Path::new("/"),
            None,
            RO_BIND_REMOUNT,
            "MS_BIND|MS_REMOUNT|MS_RDONLY|MS_NOSUID|MS_NODEV",
            None,
        )?;

        // The command line and environment.
        let argv = vec![cstr("/bin/sh")?, cstr("-c")?, cstr(&spec.script)?];
        let mut path = String::new();
        for d in &self.config.path_dirs {
            path.push_str(&d.to_string_lossy());
            path.push(':');
        }
        path.push_str("/usr/local/bin:/usr/bin:/bin");
        let env: Vec<(String, String)> = vec![
            ("PATH".into(), path),
            ("HOME".into(), "/tmp".into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
            ("PYTHONHASHSEED".into(), "0".into()),
            ("TMPDIR".into(), "/tmp".into()),
            ("GATEHOUSE_EVIDENCE".into(), super::EVIDENCE_MOUNT.into()),
        ];
        let with = |extra: &[(String, String)]| -> Result<Vec<CString>, SandboxError> {
            let mut env = env.clone();
            for (k, v) in extra {
                env.retain(|(ek, _)| ek != k);
                env.push((k.clone(), v.clone()));
            }
            env.iter().map(|(k, v)| cstr(format!("{k}={v}"))).collect()
        };
        let envp = with(&spec.env)?;
        let host = match (&spec.host, host_uid) {
            (Some(h), Some(host_uid)) => {
                if !h.argv.first().is_some_and(|p| p.starts_with('/')) {
                    return Err(SandboxError {
                        call: format!("HostSpec::argv {:?}", h.argv),
                        detail: "the host's argv must start with the absolute path of its program (it is exec'd directly: no shell, no PATH search)".into(),
                    });
                }
                Some(HostCmd {
                    uid: host_uid,
                    argv: h.argv.iter().map(cstr).collect::<Result<_, _>>()?,
                    envp: with(&h.env)?,
                })
            }
            _ => None,
        };

        // Resource limits of the command process.
        let mut rlimits = Vec::new();
        let mut add = |res: libc::__rlimit_resource_t, name: &str, soft: u64, hard: u64| {
            rlimits.push((res, libc::rlimit { rlim_cur: soft, rlim_max: hard }));
            rlimit_names.push(format!("setrlimit({name}, {{{soft}, {hard}}})"));
        };
        add(libc::RLIMIT_CPU, "RLIMIT_CPU", lim.cpu_secs, lim.cpu_secs + 1);
        add(libc::RLIMIT_FSIZE, "RLIMIT_FSIZE", lim.file_size_bytes, lim.file_size_bytes);
        add(libc::RLIMIT_NOFILE, "RLIMIT_NOFILE", lim.open_files, lim.open_files);
        add(libc::RLIMIT_CORE, "RLIMIT_CORE", 0, 0);
        // With a pids cgroup it is the one that stops (and reports) a fork
        // bomb; RLIMIT_NPROC is a looser backstop per run uid.
        let nproc = if self.cgroups.pids.is_some() { lim.processes + 8 } else { lim.processes };
        add(libc::RLIMIT_NPROC, "RLIMIT_NPROC", nproc, nproc);
        if self.cgroups.memory.is_none() {
            add(libc::RLIMIT_AS, "RLIMIT_AS", lim.memory_bytes, lim.memory_bytes);
        }

        let loopback = if self.features.net_namespace {
            // SAFETY: ifreq is plain data; all-zero is valid.
            let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
            for (i, b) in b"lo".iter().enumerate() {
                ifr.ifr_name[i] = *b as libc::c_char;
            }
            ifr.ifr_ifru.ifru_flags =
                (libc::IFF_UP | libc::IFF_LOOPBACK | libc::IFF_RUNNING) as libc::c_short;
            Some(ifr)
        } else {
            None
        };
        let cmd = CmdCtx {
            rlimits,
            uid,
            gid,
            drop_uid: self.features.uid_drop,
            channel: fds[4] >= 0,
            sh: cstr("/bin/sh")?,
            argv,
            envp,
            workspace: cstr("/workspace")?,
            tmp: cstr("/tmp")?,
            dev_null: cstr("/dev/null")?,
            proc_dir: cstr("/proc")?,
            seccomp: self.seccomp.iter().map(|f| (f.code, f.jt, f.jf, f.k)).collect(),
            host,
        };
        let ctx_file = memfd_with(&cmd.encode())?;
        let ctx = ChildCtx {
            ops: plan.ops,
            go_r: fds[0],
            report_w: fds[1],
            out_w: fds[2],
            err_w: fds[3],
            chan_w: fds[4],
            ctx_fd: ctx_file.as_raw_fd(),
            exe_fd: self.init_exe.as_raw_fd(),
            loopback,
            hostname: if self.uts_namespace { Some(cstr("gatehouse")?) } else { None },
            cgroup_tasks: cgroup_tasks.iter().map(|p| cpath(p)).collect::<Result<_, _>>()?,
            cgroup_ns: self.cgroup_ns,
            stack: vec![0u8; 256 << 10],
            init_argv: [child::INIT_ARGV0.as_ptr(), std::ptr::null()],
            init_envp: [std::ptr::null()],
        };
        Ok(Prepared { ctx, desc: plan.desc, _ctx_file: ctx_file })
    }
}
