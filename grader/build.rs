//! Builds the sandbox's init image and sets the link flags of this
//! package's own binaries (tests, benches; `server/build.rs` carries the
//! same flags for the gatehouse binary).
//!
//! THE INIT IMAGE. `grader/init` is a `no_std`, `no_main` crate with its
//! own workspace and lock file (no dependencies). It is built here with a
//! nested `cargo build --release --offline --locked` into `OUT_DIR` (its
//! own target folder), as a static, position-dependent executable without
//! start files or a C library, and copied to `OUT_DIR/gatehouse-init`,
//! which `sandbox::init_image` embeds with `include_bytes!`. It needs only
//! the stable toolchain's x86_64-unknown-linux-gnu target (its `core`);
//! any other target gets an empty image, and `Sandbox::new` refuses there.
//! The nested build gets its own flags (`CARGO_ENCODED_RUSTFLAGS`), and no
//! clippy wrapper: the outer `cargo clippy` lints `proto.rs`, which the
//! grader compiles too.
//!
//! DT_RELR. Packed relative relocations (`DT_RELR`, glibc 2.36, binutils
//! 2.38) shrink the ~44,000 relative relocations of a debug test binary
//! from a 1 MB `.rela.dyn` to a few kilobytes, which every start of the
//! binary reads and applies. (The sandbox's init used to be this very
//! executable, exec'd per command; that is now the small image, so this
//! only speeds up starting the grader's own binaries.)
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let linux_gnu = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    if linux_gnu {
        println!("cargo:rustc-link-arg=-Wl,-z,pack-relative-relocs");
    }
    let out = PathBuf::from(var("OUT_DIR"));
    let image = out.join("gatehouse-init");
    if var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ARCH") == "x86_64" {
        build_init(&out, &image);
    } else {
        std::fs::write(&image, b"").expect("writing an empty init image");
    }
}

fn build_init(out: &Path, image: &Path) {
    let manifest_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let crate_dir = manifest_dir.join("init");
    for f in ["Cargo.toml", "Cargo.lock", "src/main.rs", "src/proto.rs"] {
        println!("cargo:rerun-if-changed={}", crate_dir.join(f).display());
    }
    let target = "x86_64-unknown-linux-gnu";
    let target_dir = out.join("init-target");
    let flags = [
        "-Crelocation-model=static",
        "-Ctarget-feature=+crt-static",
        "-Clink-arg=-nostartfiles",
        "-Clink-arg=-nostdlib",
        "-Clink-arg=-static",
        "-Clink-arg=-Wl,--build-id=none",
    ];
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--release", "--offline", "--locked", "--quiet", "--target", target])
        .arg("--manifest-path")
        .arg(crate_dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"));
    for k in [
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_TARGET_DIR",
    ] {
        cmd.env_remove(k);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("running {cmd:?} to build the sandbox init image: {e}"));
    assert!(
        status.success(),
        "building the sandbox init image (grader/init) failed: {cmd:?} exited with {status}"
    );
    let built = target_dir.join(target).join("release").join("gatehouse-init");
    std::fs::copy(&built, image)
        .unwrap_or_else(|e| panic!("copying {} to {}: {e}", built.display(), image.display()));
}
