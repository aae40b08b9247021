//! Link flags for this package's own binaries (tests, benches): see
//! `grader/build.rs`, which carries the same for the grader's tests and benches.
//!
//! Packed relative relocations (`DT_RELR`, glibc 2.36, binutils 2.38)
//! encode the ~44,000 relative relocations of a large position-independent
//! binary in a few kilobytes instead of a 1 MB `.rela.dyn`, and apply them
//! faster at every start. (The sandbox's init was once this executable,
//! exec'd per command; it is now the small static image of `grader/init`.)
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // `sqlx::migrate!` embeds the migrations at compile time but does not
    // tell cargo on a stable compiler: a new migration rebuilds the crate.
    println!("cargo:rerun-if-changed=../migrations");
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu {
        println!("cargo:rustc-link-arg=-Wl,-z,pack-relative-relocs");
    }
}
