//! Link flags for this package's own binaries (tests, benches): see
//! `server/build.rs` for the gatehouse binary, which carries the same.
//!
//! The sandbox execs the running executable as each run's init (see
//! `sandbox::child`), so its start-up cost is paid per command. Most of it
//! was the dynamic loader applying ~44,000 relative relocations from a
//! 1 MB `.rela.dyn`; packed relative relocations (`DT_RELR`, glibc 2.36,
//! binutils 2.38) encode them in a few kilobytes and apply them faster.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu {
        println!("cargo:rustc-link-arg=-Wl,-z,pack-relative-relocs");
    }
}
