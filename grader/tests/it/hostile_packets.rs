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
        copy_path(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packets/token-bucket"), &dir)
            .unwrap();
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
        let err = Packet::load(&self.dir)
            .map(|_| ())
            .expect_err("a hostile packet must be refused")
            .to_string();
        assert!(err.contains(expect), "expected {expect:?} in: {err}");
        let report = check_packet(grader(), &self.dir);
        assert!(!report.ok(), "packet check passed a hostile packet");
        assert!(report.failures().any(|i| i.detail.contains(expect)), "{:#?}", report.items);
        let mut names: Vec<String> = fs::read_dir(&self.canary)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, vec!["keep.txt".to_string()], "something was written beside the packet");
        assert_eq!(fs::read_to_string(self.canary.join("keep.txt")).unwrap(), "still here");
    }
}

#[test]
fn an_absolute_mutation_target_is_refused() {
    let h = Hostile::new(|_, canary, m| {
        m.replace(
            "target = \"bucket.py\"",
            &format!("target = \"{}/payload.py\"", canary.display()),
        )
    });
    h.assert_refused("mutation.target");
}

#[test]
fn a_dotdot_mutation_target_is_refused() {
    let h = Hostile::new(|_, _, m| {
        m.replace("target = \"bucket.py\"", "target = \"../canary/payload.py\"")
    });
    h.assert_refused("mutation.target \"../canary/payload.py\"");
}

#[test]
fn a_variant_that_removes_a_host_folder_is_refused() {
    let h = Hostile::new(|_, canary, m| {
        m.replacen(
            "name = \"sleep-in-limiter\"",
            &format!("name = \"sleep-in-limiter\"\nremove = [\"{}\"]", canary.display()),
            1,
        )
    });
    h.assert_refused("variant remove");
}

#[test]
fn a_variant_name_that_climbs_is_refused() {
    let h = Hostile::new(|_, _, m| {
        m.replacen("name = \"sleep-in-limiter\"", "name = \"../../canary\"", 1)
    });
    h.assert_refused("variant name");
}

#[test]
fn a_step_id_junit_or_lay_that_climbs_is_refused() {
    Hostile::new(|_, _, m| m.replacen("id = \"hidden\"", "id = \"../canary\"", 1))
        .assert_refused("step id");
    Hostile::new(|_, canary, m| {
        m.replacen(
            "junit = \".gatehouse/hidden.xml\"",
            &format!("junit = \"{}/x.xml\"", canary.display()),
            1,
        )
    })
    .assert_refused("junit");
    Hostile::new(|_, _, m| {
        m.replacen(
            "lay = [\"test_hidden_bucket.py\"]",
            "lay = [{ from = \"../canary/keep.txt\", to = \"x\" }]",
            1,
        )
    })
    .assert_refused("lay path");
    Hostile::new(|_, _, m| {
        m.replacen(
            "lay = [\"test_hidden_bucket.py\"]",
            "lay = [{ from = \"hidden/test_hidden_bucket.py\", to = \"../../canary/x\" }]",
            1,
        )
    })
    .assert_refused("lay path");
    Hostile::new(|_, _, m| {
        m.replacen("seed_files = [\"TAKEHOME.md\"]", "seed_files = [\"../canary/keep.txt\"]", 1)
    })
    .assert_refused("seed file");
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
        std::os::unix::fs::symlink("/etc/passwd", dir.join("hidden/test_hidden_bucket.py"))
            .unwrap();
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
    // The manifest is fine; the variant's own diff is the hostile part. It
    // is refused as the packet loads, naming the diff, before any tree is
    // laid, and nothing is written anywhere.
    let err = Packet::load(&h.dir)
        .expect_err("a climbing variant diff is refused when the packet loads")
        .to_string();
    assert!(
        err.contains("variants/sleep-in-limiter.diff") && err.contains("relative path"),
        "{err}"
    );
    assert!(!h.canary.join("payload.py").exists());
    assert!(!h.dir.parent().unwrap().join("canary/payload.py").exists());
}

// ------------------------------------------------------------------ Root
// Every read and write of packet or workspace files goes through
// `grader::tree::Root`, which opens relative to a directory handle and
// never follows a link. The race the old check-then-use helpers lost (a
// folder swapped for a link to outside after the path was checked) is
// simulated deterministically: the helper is called on a tree whose
// intermediate folder already is that link.

use std::os::unix::fs::{PermissionsExt, symlink};

use grader::manifest::Lay;
use grader::tree::{Kind, Root};

/// A work folder with `sub/` swapped for a link to a canary folder beside
/// it, and a file link `f` to the canary's file.
struct Swapped {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    canary: PathBuf,
}

impl Swapped {
    fn new() -> Swapped {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let canary = tmp.path().join("canary");
        fs::create_dir_all(ws.join("sub")).unwrap();
        fs::write(ws.join("sub/keep.txt"), "checked").unwrap();
        fs::create_dir_all(&canary).unwrap();
        fs::write(canary.join("keep.txt"), "still here").unwrap();
        // The swap: the checked folder becomes a link to outside.
        fs::remove_dir_all(ws.join("sub")).unwrap();
        symlink(&canary, ws.join("sub")).unwrap();
        symlink(canary.join("keep.txt"), ws.join("f")).unwrap();
        Swapped { _tmp: tmp, ws, canary }
    }

    fn assert_canary_untouched(&self) {
        let mut names: Vec<String> = fs::read_dir(&self.canary)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            vec!["keep.txt".to_string()],
            "something was written beside the work folder"
        );
        assert_eq!(fs::read_to_string(self.canary.join("keep.txt")).unwrap(), "still here");
    }
}

/// Both resolvers: `openat2` (this kernel) and the per-part `openat` walk
/// a kernel without it gets.
fn roots(path: &Path) -> [Root; 2] {
    [Root::open(path).unwrap(), Root::open(path).unwrap().walking()]
}

#[test]
fn a_folder_swapped_for_a_link_is_refused_and_nothing_outside_changes() {
    let s = Swapped::new();
    for root in roots(&s.ws) {
        let err = root
            .write("sub/payload.py", b"print('pwned')")
            .expect_err("writing through a swapped-in link")
            .to_string();
        assert!(err.contains("sub/payload.py") && err.contains("link"), "{err}");
        let err =
            root.read("sub/keep.txt").expect_err("reading through a swapped-in link").to_string();
        assert!(err.contains("sub/keep.txt") && err.contains("link"), "{err}");
        assert!(root.kind("sub/keep.txt").is_err());
        assert!(!root.is_file("sub/keep.txt"));
        assert!(root.remove("sub/keep.txt").is_err(), "removing through a swapped-in link");
        assert!(root.write("sub/deeper/x.py", b"x").is_err());
        let other = tempfile::tempdir().unwrap();
        let dest = Root::open(other.path()).unwrap();
        assert!(root.copy("sub", &dest, "copied").is_err(), "copying a link's target");
        assert!(root.copy("sub/keep.txt", &dest, "copied").is_err());
        assert!(root.sub("sub").is_err());
        // Copying the whole tree leaves the links out and does not follow them.
        root.copy("", &dest, "").unwrap();
        assert_eq!(grader::tree::list_paths(other.path()), Vec::<String>::new());
        // Listing skips them too.
        assert_eq!(root.files("").unwrap(), Vec::<String>::new());
        assert!(root.entries("").unwrap().iter().all(|(_, k)| *k == Kind::Other));
        s.assert_canary_untouched();
    }
    // A write to the file link replaces the link; the target is untouched.
    let root = Root::open(&s.ws).unwrap();
    root.write("f", b"mine").unwrap();
    assert!(fs::symlink_metadata(s.ws.join("f")).unwrap().is_file());
    assert_eq!(fs::read_to_string(s.ws.join("f")).unwrap(), "mine");
    // Removing the folder link removes the link, never what it points at.
    assert!(root.remove("sub").unwrap());
    assert!(fs::symlink_metadata(s.ws.join("sub")).is_err());
    s.assert_canary_untouched();
    // A root that is itself a link is refused.
    let linked = s.ws.parent().unwrap().join("linked");
    symlink(&s.canary, &linked).unwrap();
    let err = Root::open(&linked).expect_err("a root that is a link").to_string();
    assert!(err.contains("link"), "{err}");
}

#[test]
fn paths_that_leave_a_root_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    for root in roots(tmp.path()) {
        for bad in ["/etc/passwd", "../escape.py", "a/../../b", "a/./b", "a//b", "a\\b", "", "."] {
            let err = root.write(bad, b"x").expect_err(bad).to_string();
            assert!(
                err.contains("not a safe relative path") && err.contains(&format!("{bad:?}")),
                "{bad:?}: {err}"
            );
            assert!(root.read(bad).is_err(), "{bad:?}");
            assert!(root.remove(bad).is_err(), "{bad:?}");
        }
    }
    assert!(!tmp.path().parent().unwrap().join("escape.py").exists());
    assert_eq!(grader::tree::list_paths(tmp.path()), Vec::<String>::new());
}

#[test]
fn honest_paths_still_work_through_a_root() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, root) in roots(tmp.path()).into_iter().enumerate() {
        let base = format!("r{i}");
        root.write(&format!("{base}/a/b/c.txt"), b"deep").unwrap();
        root.write(&format!("{base}/top.txt"), b"one").unwrap();
        root.write(&format!("{base}/top.txt"), b"two").unwrap();
        assert_eq!(root.read_to_string(&format!("{base}/a/b/c.txt")).unwrap(), "deep");
        assert_eq!(root.read(&format!("{base}/top.txt")).unwrap(), b"two");
        assert_eq!(root.kind(&format!("{base}/a")).unwrap(), Some(Kind::Dir));
        assert_eq!(root.kind(&format!("{base}/missing")).unwrap(), None);
        assert!(root.read_max(&format!("{base}/top.txt"), 2).is_err(), "over the cap");
        fs::set_permissions(
            tmp.path().join(&base).join("top.txt"),
            fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        root.copy(&base, &root, &format!("{base}-copy")).unwrap();
        assert_eq!(
            root.files(&format!("{base}-copy")).unwrap(),
            vec!["a/b/c.txt".to_string(), "top.txt".to_string()]
        );
        let mode = fs::metadata(tmp.path().join(format!("{base}-copy/top.txt")))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o755, "permission bits are kept");
        // A folder in the way of a file is replaced, and the other way round.
        root.write(&format!("{base}-copy/a"), b"now a file").unwrap();
        assert_eq!(root.kind(&format!("{base}-copy/a")).unwrap(), Some(Kind::File));
        root.copy(&format!("{base}/a"), &root, &format!("{base}-copy/a")).unwrap();
        assert_eq!(root.read_to_string(&format!("{base}-copy/a/b/c.txt")).unwrap(), "deep");
        assert!(root.remove(&format!("{base}-copy")).unwrap());
        assert!(!root.remove(&format!("{base}-copy")).unwrap(), "nothing left to remove");
        assert_eq!(
            root.files(&base).unwrap(),
            vec!["a/b/c.txt".to_string(), "top.txt".to_string()]
        );
        let sub = root.sub(&format!("{base}/a")).unwrap();
        assert_eq!(sub.read_to_string("b/c.txt").unwrap(), "deep");
    }
}

/// The packet loader's writes go through the same handle: laying packet
/// files into a workspace whose folder the candidate's code swapped for a
/// link writes nothing outside, and honest lays still land.
#[test]
fn laying_into_a_workspace_with_a_swapped_folder_writes_nothing_outside() {
    let packet =
        Packet::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packets/token-bucket"))
            .unwrap();
    let hidden = packet.files().unwrap().files("hidden").unwrap();
    let first = hidden.first().expect("token-bucket has hidden files").clone();
    let s = Swapped::new();
    let lay = Lay::Map { from: format!("hidden/{first}"), to: format!("sub/{first}"), host: false };
    let err = packet.lay_into(&[lay], &s.ws).expect_err("laying through a link").to_string();
    assert!(err.contains("link"), "{err}");
    s.assert_canary_untouched();
    packet
        .lay_into(
            &[Lay::Map {
                from: format!("hidden/{first}"),
                to: format!("fine/{first}"),
                host: false,
            }],
            &s.ws,
        )
        .unwrap();
    assert_eq!(
        fs::read(s.ws.join("fine").join(&first)).unwrap(),
        fs::read(packet.root.join("hidden").join(&first)).unwrap()
    );
    // A variant written over a tree whose folder is a link: `remove`
    // removes the link, never the canary's files.
    let v = grader::manifest::Variant {
        remove: vec!["sub".into()],
        ..packet.manifest.variants[0].clone()
    };
    packet.write_variant(&v, &s.ws).unwrap();
    s.assert_canary_untouched();
}

/// The race itself, in the order it happens: the helper is set up and the
/// path checked while `sub/` is a real folder, then `sub/` is swapped for a
/// link to outside, then the write and the read happen. The old
/// check-then-use helpers (`safe_join`, then `write_file` on the joined
/// path) wrote the payload into the canary here.
#[test]
fn a_link_swapped_in_between_check_and_use_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (ws, canary) = (tmp.path().join("ws"), tmp.path().join("canary"));
    fs::create_dir_all(ws.join("sub")).unwrap();
    fs::create_dir_all(&canary).unwrap();
    fs::write(canary.join("keep.txt"), "still here").unwrap();
    for root in roots(&ws) {
        // Checked: a real folder, nothing in the way.
        assert_eq!(root.kind("sub").unwrap(), Some(Kind::Dir));
        assert_eq!(root.kind("sub/payload.py").unwrap(), None);
        // Swapped.
        fs::remove_dir_all(ws.join("sub")).unwrap();
        symlink(&canary, ws.join("sub")).unwrap();
        // Used.
        assert!(root.write("sub/payload.py", b"print('pwned')").is_err());
        assert!(root.read("sub/keep.txt").is_err());
        assert!(!canary.join("payload.py").exists(), "the write went through the swapped-in link");
        assert_eq!(fs::read_to_string(canary.join("keep.txt")).unwrap(), "still here");
        // Put the folder back for the other resolver.
        fs::remove_file(ws.join("sub")).unwrap();
        fs::create_dir_all(ws.join("sub")).unwrap();
    }
}
