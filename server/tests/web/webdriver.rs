//! A real headless Chromium driven through WebDriver: each [`Browser`]
//! starts its own `chromedriver` on a free port (killed with its whole
//! process group on drop, so no Chromium outlives a test) with a fresh
//! profile directory, and talks to it with `fantoccini`.
//!
//! Browser tests run one at a time ([`exclusive`]): a Chromium per test is
//! heavy on a small machine, and the tests wait on real timers.
#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use tokio::sync::{Mutex, MutexGuard};

/// Where Debian's `chromium` package puts the browser.
const CHROMIUM: &str = "/usr/bin/chromium";

/// How long waits for an element or a navigation last by default (a wait
/// ends as soon as its element is there; beside the rest of the suite on
/// two cores, a page's islands once took over 20 s to hydrate).
pub const WAIT: Duration = Duration::from_secs(60);

/// Holds the one-browser-at-a-time lock for a test's duration.
pub async fn exclusive() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::const_new(());
    LOCK.lock().await
}

/// Finds an executable on `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .unwrap()
        .port()
}

/// A running `chromedriver`, killed with its process group on drop.
struct Driver {
    child: Child,
    port: u16,
}

impl Driver {
    fn start() -> Driver {
        let Some(exe) = which("chromedriver") else {
            panic!(
                "chromedriver is not installed, so the browser tests cannot run; run scripts/setup \
                 (it installs Debian's chromium and chromium-driver)"
            );
        };
        assert!(
            Path::new(CHROMIUM).is_file(),
            "{CHROMIUM} is missing; run scripts/setup (it installs Debian's chromium)"
        );
        let port = free_port();
        let child = Command::new(exe)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group, so drop can end Chromium with it.
            .process_group(0)
            .spawn()
            .expect("starting chromedriver");
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not listen on port {port} within 15 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver { child, port }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One headless Chromium session.
pub struct Browser {
    pub client: Client,
    pub base: String,
    // Field order matters: the session is closed, then the driver killed,
    // then the profile removed.
    driver: Driver,
    profile: tempfile::TempDir,
}

impl Browser {
    /// A browser with JavaScript on, for pages under `base`.
    pub async fn new(base: &str) -> Browser {
        Browser::launch(base, true).await
    }

    /// A browser with JavaScript off: the pages must work as plain HTML.
    pub async fn without_js(base: &str) -> Browser {
        Browser::launch(base, false).await
    }

    async fn launch(base: &str, javascript: bool) -> Browser {
        let driver = Driver::start();
        let profile = tempfile::tempdir().expect("profile dir");
        let mut args = vec![
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--window-size=1280,900".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut prefs = serde_json::json!({});
        if !javascript {
            args.push("--blink-settings=scriptEnabled=false".into());
            prefs = serde_json::json!({ "profile.managed_default_content_settings.javascript": 2 });
        }
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), "chrome".into());
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({ "binary": CHROMIUM, "args": args, "prefs": prefs }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", driver.port))
            .await
            .expect("a WebDriver session with headless Chromium");
        Browser { client, base: base.trim_end_matches('/').to_string(), driver, profile }
    }

    /// Ends the session (Chromium exits); drop then kills the driver.
    pub async fn close(self) {
        let Browser { client, driver, profile, .. } = self;
        let _ = client.close().await;
        drop(driver);
        drop(profile);
    }

    pub fn url(&self, path: &str) -> String {
        if path.starts_with("http") || path.starts_with("file:") {
            path.to_string()
        } else {
            format!("{}{path}", self.base)
        }
    }

    pub async fn goto(&self, path: &str) {
        let url = self.url(path);
        self.client.goto(&url).await.unwrap_or_else(|e| panic!("opening {url}: {e}"));
    }

    /// The current URL's path and query.
    pub async fn path(&self) -> String {
        let url = self.client.current_url().await.expect("current url");
        match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        }
    }

    pub async fn source(&self) -> String {
        self.client.source().await.expect("page source")
    }

    /// Waits for an element matching `css`.
    pub async fn wait(&self, css: &str) -> Element {
        self.wait_for(css, WAIT).await
    }

    pub async fn wait_for(&self, css: &str, at_most: Duration) -> Element {
        match self
            .client
            .wait()
            .at_most(at_most)
            .every(Duration::from_millis(100))
            .for_element(Locator::Css(css))
            .await
        {
            Ok(e) => e,
            Err(e) => {
                let page = self.source().await;
                let path = self.path().await;
                panic!(
                    "no {css:?} on {path} within {at_most:?}: {e}\n--- page ---\n{}",
                    tail(&page, 6000)
                );
            }
        }
    }

    /// Finds the element matching `css`, polling until it appears (at most
    /// [`WAIT`]): the page may still be changing after a form post, a
    /// redirect or hydration, so nothing is looked up only once.
    pub async fn find(&self, css: &str) -> Element {
        self.wait_for(css, WAIT).await
    }

    /// Finds the element matching `css` now, without waiting (for pages
    /// known to be settled).
    pub async fn find_now(&self, css: &str) -> Option<Element> {
        self.client.find(Locator::Css(css)).await.ok()
    }

    pub async fn exists(&self, css: &str) -> bool {
        !self.client.find_all(Locator::Css(css)).await.expect("find_all").is_empty()
    }

    pub async fn text(&self, css: &str) -> String {
        self.find(css).await.text().await.expect("element text")
    }

    /// Replaces the value of the field matching `css`.
    pub async fn fill(&self, css: &str, value: &str) {
        let e = self.find(css).await;
        e.clear().await.expect("clear field");
        e.send_keys(value).await.expect("type into field");
    }

    /// Chooses a file for the `<input type=file>` matching `css`.
    pub async fn choose_file(&self, css: &str, file: &Path) {
        let e = self.find(css).await;
        e.send_keys(&file.display().to_string()).await.expect("choose file");
    }

    pub async fn click(&self, css: &str) {
        self.find(css).await.click().await.unwrap_or_else(|e| panic!("clicking {css:?}: {e}"));
    }

    /// Waits until the current path starts with `prefix`.
    pub async fn wait_path(&self, prefix: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let path = self.path().await;
            if path.starts_with(prefix) {
                return path;
            }
            if Instant::now() > deadline {
                let page = self.source().await;
                panic!(
                    "still on {path}, expected {prefix}… within {WAIT:?}\n--- page ---\n{}",
                    tail(&page, 6000)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the element matching `css` has text containing `want`.
    pub async fn wait_text(&self, css: &str, want: &str, at_most: Duration) -> String {
        let deadline = Instant::now() + at_most;
        loop {
            if let Ok(e) = self.client.find(Locator::Css(css)).await
                && let Ok(t) = e.text().await
                && t.contains(want)
            {
                return t;
            }
            if Instant::now() > deadline {
                let page = self.source().await;
                panic!(
                    "{css:?} never showed {want:?} within {at_most:?}\n--- page ---\n{}",
                    tail(&page, 6000)
                );
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }

    /// Saves a full-window PNG as `<name>.png` under the directory named by
    /// `GATEHOUSE_SCREENSHOTS`, or `target/screenshots` (ignored by git), for
    /// looking at the pages.
    pub async fn snapshot(&self, name: &str) {
        let dir = std::env::var_os("GATEHOUSE_SCREENSHOTS")
            .map(PathBuf::from)
            .unwrap_or_else(|| crate::support::repo_root().join("target/screenshots"));
        let png = self.client.screenshot().await.expect("screenshot");
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        std::fs::write(Path::new(&dir).join(format!("{name}.png")), png).expect("write screenshot");
    }

    /// Runs a script in the page and returns its JSON result.
    pub async fn script(&self, js: &str) -> serde_json::Value {
        self.client.execute(js, vec![]).await.expect("script runs")
    }
}

/// The last `n` bytes of a page, for failure messages.
fn tail(s: &str, n: usize) -> &str {
    let mut start = s.len().saturating_sub(n);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}
