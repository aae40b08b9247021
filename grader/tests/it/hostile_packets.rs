//! Hostile packets (issue #9, part 2): a packet is data an author imports
//! from elsewhere, so every path it names must stay inside its folder or
//! the grader's work folder, and no packet file is followed through a
//! symbolic link. Each hostile copy of `token-bucket` is refused with an
//! error naming the problem, by `Packet::load` (and so by `grade`, `packet
//! check` and the web import), and nothing outside changes.

use std::fs;
use std::path::{Path, PathBuf};

use grader::check::check_packet;
use grader::packet::Packet;
use grader::tree::copy_path;

use crate::grader;

/// A copy of token-bucket in a fresh folder, edited by `edit`, plus a
/// canary folder beside it that the packet tries to reach.
struct Hostile {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    canary: PathBuf,
}

impl Hostile {
    fn new(edit: impl FnOnce(&Path, &Path, String) -> String) -> Hostile {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("token-bucket");
        copy_path(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packets/token-bucket"), &dir).unwrap();
        let canary = tmp.path().join("canary");
        fs::create_dir_all(&canary).unwrap();
        fs::write(canary.join("keep.txt"), "still here").unwrap();
        let manifest = fs::read_to_string(dir.join("packet.toml")).unwrap();
        let edited = edit(&dir, &canary, manifest);
        fs::write(dir.join("packet.toml"), edited).unwrap();
        Hostile { _tmp: tmp, dir, canary }
    }

    /// Loading is refused with `expect` in the message, `packet check`
    /// fails on the manifest, and the canary folder is as it was.
    fn assert_refused(&self, expect: &str) {
        let err = Packet::load(&self.dir).map(|_| ()).expect_err("a hostile packet must be refused").to_string();
        assert!(err.contains(expect), "expected {expect:?} in: {err}");
        let report = check_packet(grader(), &self.dir);
        assert!(!report.ok(), "packet check passed a hostile packet");
        assert!(report.failures().any(|i| i.detail.contains(expect)), "{:#?}", report.items);
        let mut names: Vec<String> = fs::read_dir(&self.canary).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        assert_eq!(names, vec!["keep.txt".to_string()], "something was written beside the packet");
        assert_eq!(fs::read_to_string(self.canary.join("keep.txt")).unwrap(), "still here");
    }
}

#[test]
fn an_absolute_mutation_target_is_refused() {
    let h = Hostile::new(|_, canary, m| m.replace("target = \"bucket.py\"", &format!("target = \"{}/payload.py\"", canary.display())));
    h.assert_refused("mutation.target");
}

#[test]
fn a_dotdot_mutation_target_is_refused() {
    let h = Hostile::new(|_, _, m| m.replace("target = \"bucket.py\"", "target = \"../canary/payload.py\""));
    h.assert_refused("mutation.target \"../canary/payload.py\"");
}

#[test]
fn a_variant_that_removes_a_host_folder_is_refused() {
    let h = Hostile::new(|_, canary, m| m.replacen("name = \"sleep-in-limiter\"", &format!("name = \"sleep-in-limiter\"\nremove = [\"{}\"]", canary.display()), 1));
    h.assert_refused("variant remove");
}

#[test]
fn a_variant_name_that_climbs_is_refused() {
    let h = Hostile::new(|_, _, m| m.replacen("name = \"sleep-in-limiter\"", "name = \"../../canary\"", 1));
    h.assert_refused("variant name");
}

#[test]
fn a_step_id_junit_or_lay_that_climbs_is_refused() {
    Hostile::new(|_, _, m| m.replacen("id = \"hidden\"", "id = \"../canary\"", 1)).assert_refused("step id");
    Hostile::new(|_, canary, m| m.replacen("junit = \".gatehouse/hidden.xml\"", &format!("junit = \"{}/x.xml\"", canary.display()), 1)).assert_refused("junit");
    Hostile::new(|_, _, m| m.replacen("lay = [\"test_hidden_bucket.py\"]", "lay = [{ from = \"../canary/keep.txt\", to = \"x\" }]", 1)).assert_refused("lay path");
    Hostile::new(|_, _, m| m.replacen("lay = [\"test_hidden_bucket.py\"]", "lay = [{ from = \"hidden/test_hidden_bucket.py\", to = \"../../canary/x\" }]", 1))
        .assert_refused("lay path");
    Hostile::new(|_, _, m| m.replacen("seed_files = [\"TAKEHOME.md\"]", "seed_files = [\"../canary/keep.txt\"]", 1)).assert_refused("seed file");
}

#[test]
fn symbolic_links_in_a_packet_are_refused() {
    // A sample file and a hidden test that point at host files.
    let h = Hostile::new(|dir, canary, m| {
        fs::remove_file(dir.join("sample/bucket.py")).unwrap();
        std::os::unix::fs::symlink(canary.join("keep.txt"), dir.join("sample/bucket.py")).unwrap();
        m
    });
    h.assert_refused("a symbolic link");
    let h = Hostile::new(|dir, _, m| {
        fs::remove_file(dir.join("hidden/test_hidden_bucket.py")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("hidden/test_hidden_bucket.py")).unwrap();
        m
    });
    h.assert_refused("a symbolic link");
    let h = Hostile::new(|dir, canary, m| {
        std::os::unix::fs::symlink(canary, dir.join("starter/outside")).unwrap();
        m
    });
    h.assert_refused("a symbolic link");
}

/// A variant diff that names a path outside the submission folder: the
/// self-test reports it and writes nothing there.
#[test]
fn a_variant_diff_that_climbs_writes_nothing_outside() {
    let h = Hostile::new(|dir, _, m| {
        let diff = "--- a/../../canary/payload.py\n+++ b/../../canary/payload.py\n@@ -0,0 +1 @@\n+print('pwned')\n";
        fs::write(dir.join("variants/sleep-in-limiter.diff"), diff).unwrap();
        m
    });
    // The manifest is fine; the variant's own diff is the hostile part.
    let packet = Packet::load(&h.dir).expect("the manifest itself is valid");
    let dest = tempfile::tempdir().unwrap();
    let v = packet.manifest.variants.iter().find(|v| v.name == "sleep-in-limiter").unwrap();
    let err = packet.write_variant(v, &dest.path().join("sub")).expect_err("a climbing diff path is refused").to_string();
    assert!(err.contains("relative path"), "{err}");
    assert!(!h.canary.join("payload.py").exists());
    assert!(!dest.path().join("canary").exists() && !dest.path().parent().unwrap().join("canary/payload.py").exists());
}
