//! Real `gatehouse serve` and `gatehouse worker` processes for the tests
//! that kill, restart and starve them (#29: restarts, disk full, backups,
//! the soak): each a child of the test with its own environment, its log
//! in a file, killed with SIGKILL when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::support::repo_root;

/// A free port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The settings a child process gets (as `GATEHOUSE_*` variables).
#[derive(Clone)]
pub struct Settings {
    pub database_url: String,
    pub data_dir: PathBuf,
    pub lease_secs: u64,
    /// Extra variables (`GATEHOUSE_*` or `TMPDIR`).
    pub env: Vec<(String, String)>,
}

impl Settings {
    fn apply(&self, cmd: &mut Command, log: &Path) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
        cmd.env_remove("GATEHOUSE_TEST_DATABASE")
            .env_remove("GATEHOUSE_TEST_PG_STATEMENTS")
            .env("GATEHOUSE_CONFIG", self.data_dir.join("no-such-config.toml"))
            .env("GATEHOUSE_DATABASE_URL", &self.database_url)
            .env("GATEHOUSE_DATA_DIR", &self.data_dir)
            .env("GATEHOUSE_PACKETS_DIR", "")
            .env("GATEHOUSE_BUILTIN_SELF_TEST", "off")
            .env("GATEHOUSE_LEASE_SECS", self.lease_secs.to_string())
            .env("GATEHOUSE_LOG", "info,sqlx=warn")
            // No backtrace captured with an error (a panic still prints
            // one under RUST_BACKTRACE): formatting one makes this debug
            // build map and parse its debug info, over 200 MiB of resident
            // memory that would read as the server's growth.
            .env("RUST_LIB_BACKTRACE", "0")
            // The log goes to standard output: kept beside standard error
            // in the log file that a failing test prints.
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
    }
}

/// A `gatehouse serve` child on its own port.
pub struct Server {
    pub settings: Settings,
    pub port: u16,
    pub workers: usize,
    pub log: PathBuf,
    child: Option<Child>,
}

impl Server {
    pub fn new(settings: Settings, workers: usize, log: PathBuf) -> Server {
        Server { settings, port: free_port(), workers, log, child: None }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Starts it and waits for `/healthz`.
    pub async fn start(&mut self) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gatehouse"));
        cmd.arg("serve")
            .current_dir(&self.settings.data_dir)
            .env("GATEHOUSE_LISTEN", format!("127.0.0.1:{}", self.port))
            .env("GATEHOUSE_PUBLIC_URL", self.base())
            .env("GATEHOUSE_SITE_DIR", repo_root().join("target/site"))
            .env("GATEHOUSE_WORKERS", self.workers.to_string());
        self.settings.apply(&mut cmd, &self.log);
        std::fs::create_dir_all(&self.settings.data_dir).unwrap();
        self.child = Some(cmd.spawn().expect("gatehouse serve"));
        let start = Instant::now();
        loop {
            if let Ok(r) = reqwest::get(format!("{}/healthz", self.base())).await
                && r.status() == 200
            {
                return;
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!("the server exited ({status}): {}", self.log_text());
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the server did not start: {}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL: no chance to clean up.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// `gatehouse worker --count n` children.
pub struct Workers {
    pub settings: Settings,
    pub log: PathBuf,
    pub children: Vec<Child>,
}

impl Workers {
    pub fn new(settings: Settings, log: PathBuf) -> Workers {
        Workers { settings, log, children: Vec::new() }
    }

    /// Starts one more worker process of `count` workers; its index.
    pub fn spawn(&mut self, count: usize) -> usize {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gatehouse"));
        cmd.args(["worker", "--count", &count.to_string()]).current_dir(&self.settings.data_dir);
        self.settings.apply(&mut cmd, &self.log);
        std::fs::create_dir_all(&self.settings.data_dir).unwrap();
        self.children.push(cmd.spawn().expect("gatehouse worker"));
        self.children.len() - 1
    }

    /// SIGKILLs worker `i` and starts another in its place.
    pub fn kill9_and_replace(&mut self, i: usize, count: usize) {
        let mut old = self.children.remove(i);
        let _ = old.kill();
        let _ = old.wait();
        self.spawn(count);
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A kernel-reported memory figure of `pid` in KiB (`VmRSS`, `VmHWM`).
pub fn status_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A size-capped tmpfs mounted at `dir` (made) for the life of the value:
/// a small disk a test can fill and free. Unmounted (lazily) when dropped.
pub struct SmallDisk {
    pub dir: PathBuf,
}

impl SmallDisk {
    pub fn mount(dir: &Path, bytes: u64) -> SmallDisk {
        std::fs::create_dir_all(dir).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes},mode=0755"), "gatehouse-test"])
            .arg(dir)
            .status()
            .expect("mount(8)");
        assert!(status.success(), "mounting a tmpfs at {}", dir.display());
        SmallDisk { dir: dir.to_path_buf() }
    }

    /// Free bytes on it.
    pub fn free(&self) -> u64 {
        let c = std::ffi::CString::new(self.dir.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: statvfs fills a zeroed struct for a NUL-terminated path.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
        st.f_bavail * st.f_frsize
    }

    /// Fills it with a file `name` until at most `leave` bytes are free.
    pub fn fill(&self, name: &str, leave: u64) -> PathBuf {
        use std::io::Write;
        let path = self.dir.join(name);
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path).unwrap();
        let block = vec![0x5au8; 64 << 10];
        loop {
            let free = self.free();
            if free <= leave {
                break;
            }
            let n = ((free - leave) as usize).min(block.len());
            if f.write_all(&block[..n.max(1)]).is_err() {
                break;
            }
            let _ = f.flush();
        }
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}
