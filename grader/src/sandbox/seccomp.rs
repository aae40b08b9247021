//! The command's seccomp filter: allow by default, refuse the system calls
//! a test suite never needs and an escape would (EPERM).
//!
//! Written as raw classic BPF (a few dozen instructions, no jumps longer
//! than one instruction) so that it is built once, in the parent, and the
//! command process only hands it to `prctl(PR_SET_SECCOMP)` before exec.
//!
//! Refused with EPERM:
//! - namespaces: `unshare`, `setns`, and `clone` with any `CLONE_NEW*`
//!   flag (threads and plain forks still work). `clone3` gets ENOSYS, whose
//!   flags sit in memory a filter cannot read; glibc then falls back to
//!   `clone`;
//! - `io_uring_setup`, `io_uring_enter`, `io_uring_register`;
//! - sockets of any family but AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK
//!   (AF_VSOCK reaches a VM's hypervisor past the network namespace;
//!   AF_ALG, AF_PACKET, AF_KEY, Bluetooth, ... are kernel attack surface);
//! - kernel keys: `keyctl`, `add_key`, `request_key`;
//! - `ptrace`, `process_vm_readv`, `process_vm_writev`, `pidfd_getfd`;
//! - `bpf`, `perf_event_open`, `userfaultfd`, `modify_ldt`, `iopl`, `ioperm`;
//! - mounts: `mount`, `umount2`, `pivot_root`, `chroot`, `open_tree`,
//!   `move_mount`, `fsopen`, `fsconfig`, `fsmount`, `fspick`, `mount_setattr`;
//! - the kernel and machine: `init_module`, `finit_module`, `delete_module`,
//!   `kexec_load`, `kexec_file_load`, `reboot`, `swapon`, `swapoff`, `acct`,
//!   `quotactl`, `syslog`, `settimeofday`, `clock_settime`, `clock_adjtime`,
//!   `sethostname`, `setdomainname`, `vhangup`, `uselib`, `lookup_dcookie`,
//!   `open_by_handle_at`, `fanotify_init`;
//! - any call of another ABI (i386 `int 0x80`, x32).

/// `AUDIT_ARCH_X86_64`.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;

/// Every `CLONE_NEW*` flag (including CLONE_NEWTIME, 0x80).
pub const CLONE_NS_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP) as u32
    | 0x80;

/// Socket families the command may use.
pub const ALLOWED_FAMILIES: [u32; 4] =
    [libc::AF_UNIX as u32, libc::AF_INET as u32, libc::AF_INET6 as u32, libc::AF_NETLINK as u32];

/// The system calls refused outright.
#[cfg(target_arch = "x86_64")]
pub const BLOCKED: &[(libc::c_long, &str)] = &[
    (libc::SYS_unshare, "unshare"),
    (libc::SYS_setns, "setns"),
    (libc::SYS_io_uring_setup, "io_uring_setup"),
    (libc::SYS_io_uring_enter, "io_uring_enter"),
    (libc::SYS_io_uring_register, "io_uring_register"),
    (libc::SYS_keyctl, "keyctl"),
    (libc::SYS_add_key, "add_key"),
    (libc::SYS_request_key, "request_key"),
    (libc::SYS_ptrace, "ptrace"),
    (libc::SYS_process_vm_readv, "process_vm_readv"),
    (libc::SYS_process_vm_writev, "process_vm_writev"),
    (libc::SYS_pidfd_getfd, "pidfd_getfd"),
    (libc::SYS_bpf, "bpf"),
    (libc::SYS_perf_event_open, "perf_event_open"),
    (libc::SYS_userfaultfd, "userfaultfd"),
    (libc::SYS_modify_ldt, "modify_ldt"),
    (libc::SYS_iopl, "iopl"),
    (libc::SYS_ioperm, "ioperm"),
    (libc::SYS_mount, "mount"),
    (libc::SYS_umount2, "umount2"),
    (libc::SYS_pivot_root, "pivot_root"),
    (libc::SYS_chroot, "chroot"),
    (libc::SYS_open_tree, "open_tree"),
    (libc::SYS_move_mount, "move_mount"),
    (libc::SYS_fsopen, "fsopen"),
    (libc::SYS_fsconfig, "fsconfig"),
    (libc::SYS_fsmount, "fsmount"),
    (libc::SYS_fspick, "fspick"),
    (libc::SYS_mount_setattr, "mount_setattr"),
    (libc::SYS_init_module, "init_module"),
    (libc::SYS_finit_module, "finit_module"),
    (libc::SYS_delete_module, "delete_module"),
    (libc::SYS_kexec_load, "kexec_load"),
    (libc::SYS_kexec_file_load, "kexec_file_load"),
    (libc::SYS_reboot, "reboot"),
    (libc::SYS_swapon, "swapon"),
    (libc::SYS_swapoff, "swapoff"),
    (libc::SYS_acct, "acct"),
    (libc::SYS_quotactl, "quotactl"),
    (libc::SYS_syslog, "syslog"),
    (libc::SYS_settimeofday, "settimeofday"),
    (libc::SYS_clock_settime, "clock_settime"),
    (libc::SYS_clock_adjtime, "clock_adjtime"),
    (libc::SYS_sethostname, "sethostname"),
    (libc::SYS_setdomainname, "setdomainname"),
    (libc::SYS_vhangup, "vhangup"),
    (libc::SYS_uselib, "uselib"),
    (libc::SYS_lookup_dcookie, "lookup_dcookie"),
    (libc::SYS_open_by_handle_at, "open_by_handle_at"),
    (libc::SYS_fanotify_init, "fanotify_init"),
];

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const RET_EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
const RET_ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;

/// Offsets in `struct seccomp_data`.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// Low 32 bits of args[0] (little endian).
const OFF_ARG0: u32 = 16;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The filter, or None on an architecture it is not written for.
#[cfg(target_arch = "x86_64")]
pub fn program() -> Option<Vec<libc::sock_filter>> {
    let mut p = vec![
        stmt(LD_W_ABS, OFF_ARCH),
        jump(JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(RET_K, RET_EPERM),
        stmt(LD_W_ABS, OFF_NR),
        // x32 system calls have bit 30 set.
        jump(JGE_K, 0x4000_0000, 0, 1),
        stmt(RET_K, RET_EPERM),
    ];
    for &(nr, _) in BLOCKED {
        p.push(jump(JEQ_K, nr as u32, 0, 1));
        p.push(stmt(RET_K, RET_EPERM));
    }
    p.push(jump(JEQ_K, libc::SYS_clone3 as u32, 0, 1));
    p.push(stmt(RET_K, RET_ENOSYS));
    // clone(flags, ...): refuse any namespace flag.
    p.push(jump(JEQ_K, libc::SYS_clone as u32, 0, 4));
    p.push(stmt(LD_W_ABS, OFF_ARG0));
    p.push(jump(JSET_K, CLONE_NS_FLAGS, 0, 1));
    p.push(stmt(RET_K, RET_EPERM));
    p.push(stmt(RET_K, RET_ALLOW));
    // socket(domain, ...) and socketpair(domain, ...): allowed families only.
    for nr in [libc::SYS_socket, libc::SYS_socketpair] {
        let n = ALLOWED_FAMILIES.len() as u8;
        p.push(jump(JEQ_K, nr as u32, 0, 2 * n + 2));
        p.push(stmt(LD_W_ABS, OFF_ARG0));
        for fam in ALLOWED_FAMILIES {
            p.push(jump(JEQ_K, fam, 0, 1));
            p.push(stmt(RET_K, RET_ALLOW));
        }
        p.push(stmt(RET_K, RET_EPERM));
    }
    p.push(stmt(RET_K, RET_ALLOW));
    Some(p)
}

#[cfg(not(target_arch = "x86_64"))]
pub fn program() -> Option<Vec<libc::sock_filter>> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the classic BPF subset the filter uses over one seccomp_data.
    fn eval(p: &[libc::sock_filter], arch: u32, nr: u32, arg0: u32) -> u32 {
        let mut pc = 0usize;
        let mut acc = 0u32;
        loop {
            let i = p[pc];
            match i.code {
                LD_W_ABS => {
                    acc = match i.k {
                        OFF_NR => nr,
                        OFF_ARCH => arch,
                        OFF_ARG0 => arg0,
                        k => panic!("load at {k}"),
                    };
                    pc += 1;
                }
                RET_K => return i.k,
                JEQ_K | JGE_K | JSET_K => {
                    let taken = match i.code {
                        JEQ_K => acc == i.k,
                        JGE_K => acc >= i.k,
                        _ => acc & i.k != 0,
                    };
                    pc += 1 + if taken { i.jt } else { i.jf } as usize;
                }
                c => panic!("opcode {c:#x}"),
            }
        }
    }

    #[test]
    fn filter_refuses_the_listed_calls_and_allows_the_rest() {
        let p = program().expect("x86_64");
        let native = |nr: libc::c_long, arg0: i64| eval(&p, AUDIT_ARCH, nr as u32, arg0 as u32);
        for &(nr, name) in BLOCKED {
            assert_eq!(native(nr, 0), RET_EPERM, "{name}");
        }
        for (nr, arg0, expect) in [
            (libc::SYS_read, 0, RET_ALLOW),
            (libc::SYS_openat, 0, RET_ALLOW),
            (
                libc::SYS_clone,
                (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as i64,
                RET_ALLOW,
            ),
            (libc::SYS_clone, libc::SIGCHLD as i64, RET_ALLOW),
            (libc::SYS_clone, (libc::CLONE_NEWUSER | libc::SIGCHLD) as i64, RET_EPERM),
            (libc::SYS_clone, libc::CLONE_NEWNET as i64, RET_EPERM),
            (libc::SYS_clone, 0x80, RET_EPERM),
            (libc::SYS_clone3, 0, RET_ENOSYS),
            (libc::SYS_socket, libc::AF_INET as i64, RET_ALLOW),
            (libc::SYS_socket, libc::AF_INET6 as i64, RET_ALLOW),
            (libc::SYS_socket, libc::AF_UNIX as i64, RET_ALLOW),
            (libc::SYS_socket, libc::AF_NETLINK as i64, RET_ALLOW),
            (libc::SYS_socket, libc::AF_VSOCK as i64, RET_EPERM),
            (libc::SYS_socket, libc::AF_ALG as i64, RET_EPERM),
            (libc::SYS_socket, libc::AF_PACKET as i64, RET_EPERM),
            (libc::SYS_socketpair, libc::AF_UNIX as i64, RET_ALLOW),
            (libc::SYS_socketpair, libc::AF_VSOCK as i64, RET_EPERM),
            (libc::SYS_getpid, 0, RET_ALLOW),
            (0x4000_0000 + libc::SYS_getpid, 0, RET_EPERM),
        ] {
            assert_eq!(native(nr, arg0), expect, "nr {nr} arg0 {arg0:#x}");
        }
        // Another ABI (i386) is refused whatever the call.
        assert_eq!(eval(&p, 0x4000_0003, 20, 0), RET_EPERM);
        assert!(p.len() < 4096);
    }
}
