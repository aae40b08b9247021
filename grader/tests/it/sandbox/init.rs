//! The init process and the binaries: its image, what it shows and holds, how it fails.

use std::fs;
use std::time::{Duration, Instant};

use grader::sandbox::Sandbox;

use super::*;

#[test]
fn sandbox_init_does_not_show_the_grader_argv() {
    let exe = std::env::current_exe().expect("exe").to_string_lossy().into_owned();
    let r = run(
        "(cat /proc/1/cmdline 2>&1 || true) | tr '\\0\\n' '  '; echo; ls /proc | grep -c '^[0-9]'; cat /proc/1/environ 2>/dev/null | wc -c",
        small_limits(),
    );
    assert!(!r.stdout_tail.contains(&exe), "{r:?}");
    let lines: Vec<&str> = r.stdout_tail.lines().collect();
    assert!(lines[0].contains("No such file"), "hidepid hides init: {r:?}");
    let pids: u32 = lines[1].parse().expect("count");
    assert!((1..=4).contains(&pids), "only the run's own processes are listed: {r:?}");
    assert_eq!(lines[2], "0", "{r:?}");
    // Seen from the host (as root), init's command line is the fixed title.
    let h = std::thread::spawn(|| run(": gh_title_probe; sleep 1.5", small_limits()));
    let mut titles = Vec::new();
    let t0 = Instant::now();
    while titles.is_empty() && t0.elapsed() < Duration::from_secs(5) {
        titles = host_processes_with("gatehouse-sandbox-init");
        std::thread::sleep(Duration::from_millis(50));
    }
    h.join().expect("join");
    assert!(!titles.is_empty(), "no sandbox init with the fixed title");
    assert!(titles.iter().all(|t| !t.contains(&exe)), "{titles:?}");
}

/// The host pid of the sandbox init running the command whose shell
/// command line holds `marker` (the shell's parent), polling up to 5 s.
fn init_host_pid_of(marker: &str) -> Option<u32> {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        for line in host_processes_with(marker) {
            let pid = line.split(':').next().unwrap_or("");
            let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
            let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
            let ppid: u32 =
                after.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
            let title = fs::read(format!("/proc/{ppid}/cmdline")).unwrap_or_default();
            if title.starts_with(b"gatehouse-sandbox-init\0") {
                return Some(ppid);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Every readable mapping of process `pid` (read as root through
/// /proc/<pid>/mem): whether `needle` occurs in any, and how many bytes
/// were read.
fn memory_holds(pid: u32, needle: &[u8]) -> (bool, u64) {
    use std::os::unix::fs::FileExt;
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    let mem = fs::File::open(format!("/proc/{pid}/mem")).expect("open mem");
    let mut read = 0u64;
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else { continue };
        if !perms.starts_with('r') || line.ends_with("[vvar]") || line.ends_with("[vsyscall]") {
            continue;
        }
        let (a, b) = range.split_once('-').expect("range");
        let (a, b) =
            (u64::from_str_radix(a, 16).expect("start"), u64::from_str_radix(b, 16).expect("end"));
        // In chunks of 1 MiB that overlap by the needle's length.
        let mut buf = vec![0u8; 1 << 20];
        let mut at = a;
        while at < b {
            let len = ((b - at) as usize).min(buf.len());
            let Ok(n) = mem.read_at(&mut buf[..len], at) else { break };
            if n == 0 {
                break;
            }
            read += n as u64;
            if buf[..n].windows(needle.len()).any(|w| w == needle) {
                return (true, read);
            }
            if at + (n as u64) >= b {
                break;
            }
            at += (n - needle.len().min(n - 1)) as u64;
        }
    }
    (false, read)
}

/// Init is a freshly exec'd image (issue 17, item 7): a secret in this
/// process's heap, which a forked init would carry in its copy of the
/// grader's memory, is nowhere in init's memory; init's command line is
/// the fixed title, its environment empty, its name `gatehouse-init`.
#[test]
fn sandbox_init_holds_no_copy_of_the_grader_memory() {
    // Made at run time, so it is in no binary: only in this heap.
    let mut seed = [0u8; 16];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut seed))
        .expect("urandom");
    let secret: Vec<u8> =
        format!("gh-heap-secret-{}", seed.iter().map(|b| format!("{b:02x}")).collect::<String>())
            .into_bytes();
    let marker =
        format!("gh_mem_probe_{:02x}{:02x}{:02x}{:02x}", seed[0], seed[1], seed[2], seed[3]);
    // The method finds the secret where it is: in this process.
    assert!(
        memory_holds(std::process::id(), &secret).0,
        "the probe cannot find the secret in its own heap"
    );
    let script = format!(": {marker}; sleep 6; true");
    let h = std::thread::spawn(move || run(&script, small_limits()));
    let pid = init_host_pid_of(&marker).expect("the run's sandbox init, seen from the host");
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let environ = fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let (found, read) = memory_holds(pid, &secret);
    // The whole scan happened while init was alive (the run still sleeps).
    let scanned_live = !h.is_finished();
    let r = h.join().expect("join");
    assert!(scanned_live, "the run ended before init's memory was read");
    assert!(r.success(), "{r:?}");
    assert!(read > 0, "nothing of init's memory was readable");
    assert!(!found, "the grader's heap secret is in the sandbox init's memory ({read} bytes read)");
    assert_eq!(comm.trim_end(), "gatehouse-init", "init is not the exec'd small init");
    assert!(environ.is_empty(), "init has an environment: {:?}", String::from_utf8_lossy(&environ));
    assert_eq!(cmdline, b"gatehouse-sandbox-init\0", "init's whole command line is the title");
    std::hint::black_box(&secret);
}

/// The image every run's init execs is the small static one embedded in
/// the grader (`grader/init`), from its sealed memfd: not this executable,
/// no dynamic loader or C library mapped, a few pages in all.
#[test]
fn sandbox_init_is_the_small_static_image_from_a_memfd() {
    let image = grader::sandbox::init_image();
    assert!(!image.is_empty() && image.len() < 64 << 10, "the init image is {} bytes", image.len());
    let script = ": gh_small_init_probe; sleep 3; true";
    let h = std::thread::spawn(move || run(script, small_limits()));
    let pid = init_host_pid_of("gh_small_init_probe")
        .expect("the run's sandbox init, seen from the host");
    let exe_link = fs::read_link(format!("/proc/{pid}/exe")).ok();
    let exe = fs::read(format!("/proc/{pid}/exe"));
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let alive = !h.is_finished();
    let r = h.join().expect("join");
    assert!(alive && r.success(), "{r:?}");
    let link = exe_link.expect("init's exe link").to_string_lossy().into_owned();
    assert!(
        link.starts_with("/memfd:gatehouse-init"),
        "init runs {link}, not the init image's memfd"
    );
    assert_eq!(
        exe.expect("init's executable").as_slice(),
        image,
        "init runs exactly the embedded image"
    );
    let me = std::env::current_exe().expect("exe").to_string_lossy().into_owned();
    assert!(!maps.contains(&me), "this executable is mapped in init:\n{maps}");
    assert!(
        !maps.contains("libc.so") && !maps.contains("ld-linux"),
        "a C library or loader is mapped in init:\n{maps}"
    );
    assert!(maps.contains("/memfd:gatehouse-init"), "{maps}");
    // Resident memory: the image's pages, its stacks and the context.
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    assert!(rss_kb < 1024, "init holds {rss_kb} kB resident");
}

/// An exec of the init image that the kernel refuses (here a seccomp
/// filter on the thread that starts the sandbox answers EACCES to
/// `execveat`) is a sandbox failure naming the exec, not a command's exit.
#[test]
fn sandbox_init_exec_failure_is_a_sandbox_error_naming_the_call() {
    let err = std::thread::spawn(|| {
        let nr = libc::SYS_execveat as u32;
        let ld = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
        let jeq = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
        let ret = (libc::BPF_RET | libc::BPF_K) as u16;
        let mut filter = [
            libc::sock_filter { code: ld, jt: 0, jf: 0, k: 0 },
            libc::sock_filter { code: jeq, jt: 0, jf: 1, k: nr },
            libc::sock_filter {
                code: ret,
                jt: 0,
                jf: 0,
                k: libc::SECCOMP_RET_ERRNO | libc::EACCES as u32,
            },
            libc::sock_filter { code: ret, jt: 0, jf: 0, k: libc::SECCOMP_RET_ALLOW },
        ];
        let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_mut_ptr() };
        // SAFETY: this thread only (no TSYNC); it ends after the probe.
        unsafe {
            assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
            assert_eq!(
                libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const libc::sock_fprog
                ),
                0
            );
        }
        match Sandbox::new(Sandbox::host_default_config()) {
            Ok(_) => panic!("a sandbox whose init cannot be exec'd started"),
            Err(e) => e,
        }
    })
    .join()
    .expect("join");
    assert!(err.call.contains("execveat(") && err.call.contains("gatehouse-sandbox-init"), "{err}");
    assert!(err.detail.contains("EACCES"), "{err}");
    // The same configuration on a thread without the filter starts.
    assert!(Sandbox::new(Sandbox::host_default_config()).is_ok());
}

/// The init image is a static executable without a C library, so a root
/// with no system folders still starts init and the command's own exec is
/// what fails (naming it), not init's.
#[test]
fn sandbox_init_needs_nothing_from_the_run_root() {
    let config = grader::sandbox::SandboxConfig {
        read_only_binds: Vec::new(),
        ..Sandbox::host_default_config()
    };
    let err = match Sandbox::new(config) {
        Ok(_) => panic!("a sandbox without /bin/sh in its root started"),
        Err(e) => e,
    };
    assert!(err.call.contains("execve(\"/bin/sh\""), "{err}");
    assert!(err.detail.contains("ENOENT"), "{err}");
}

/// This executable (like every grader and server binary, see
/// `grader/build.rs`) is linked with packed relative relocations: its
/// start-up does not read and apply a megabyte of `R_X86_64_RELATIVE`
/// entries (about 44,000 of them before). (It was the sandbox's init image
/// once; the small init image below has no relocations at all.)
#[test]
fn the_grader_binaries_are_linked_with_packed_relative_relocations() {
    let elf = fs::read("/proc/self/exe").expect("reading this executable");
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap());
    assert_eq!(&elf[..5], b"\x7fELF\x02", "a 64-bit ELF file");
    let (phoff, phentsize, phnum) = (u64_at(0x20) as usize, u16_at(0x36), u16_at(0x38));
    let dynamic = (0..phnum)
        .map(|i| phoff + i * phentsize)
        .find(|&ph| u32::from_le_bytes(elf[ph..ph + 4].try_into().unwrap()) == 2) // PT_DYNAMIC
        .expect("a dynamic section");
    let (off, size) = (u64_at(dynamic + 8) as usize, u64_at(dynamic + 32) as usize);
    let entries: Vec<(u64, u64)> = (off..off + size)
        .step_by(16)
        .map(|e| (u64_at(e), u64_at(e + 8)))
        .take_while(|&(tag, _)| tag != 0)
        .collect();
    let tag = |t: u64| entries.iter().find(|e| e.0 == t).map(|e| e.1);
    const DT_RELASZ: u64 = 8;
    const DT_RELRSZ: u64 = 35;
    assert!(tag(DT_RELRSZ).is_some_and(|n| n > 0), "DT_RELR: {entries:x?}");
    let rela = tag(DT_RELASZ).unwrap_or(0) / 24;
    assert!(rela < 2_000, "{rela} RELA relocations are left to apply one by one");
}

/// The sandbox's init image is a static, position-dependent executable:
/// no interpreter (dynamic loader), no dynamic section, no relocations to
/// apply at start-up, a few kilobytes.
#[test]
fn the_init_image_is_static_without_loader_or_relocations() {
    let elf = grader::sandbox::init_image();
    assert!(elf.len() > 64 && elf.len() < 64 << 10, "{} bytes", elf.len());
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap());
    assert_eq!(&elf[..5], b"\x7fELF\x02", "a 64-bit ELF file");
    assert_eq!(u16_at(0x10), 2, "ET_EXEC, not a position-independent ET_DYN");
    let (phoff, phentsize, phnum) = (u64_at(0x20) as usize, u16_at(0x36), u16_at(0x38));
    let types: Vec<u32> = (0..phnum)
        .map(|i| phoff + i * phentsize)
        .map(|ph| u32::from_le_bytes(elf[ph..ph + 4].try_into().unwrap()))
        .collect();
    const PT_LOAD: u32 = 1;
    const PT_DYNAMIC: u32 = 2;
    const PT_INTERP: u32 = 3;
    assert!(types.contains(&PT_LOAD), "{types:?}");
    assert!(
        !types.contains(&PT_INTERP) && !types.contains(&PT_DYNAMIC),
        "program headers {types:?}"
    );
}
