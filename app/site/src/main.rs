//! Builds the hydrate bundle into `target/site/pkg`:
//!
//! 1. `cargo build -p app --lib --target wasm32-unknown-unknown --features
//!    hydrate --profile wasm-release` (a separate cargo run, so the `ssr` and
//!    `hydrate` features are never unified);
//! 2. wasm-bindgen's library, the same version as the `wasm-bindgen` crate the
//!    app links, writes `gatehouse.js` and `gatehouse_bg.wasm`.
//!
//! Usage: `cargo run -p site --release -- [--out target/site]`.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};

fn main() -> anyhow::Result<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize()?;
    let mut out = root.join("target/site");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out = PathBuf::from(args.next().context("--out needs a directory")?),
            other => bail!("unknown argument {other:?}; usage: build-site [--out DIR]"),
        }
    }
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .current_dir(&root)
        .args(["build", "--locked", "-p", "app", "--lib", "--target", "wasm32-unknown-unknown"])
        .args(["--no-default-features", "--features", "hydrate", "--profile", "wasm-release"])
        .status()
        .context("running cargo build for wasm32-unknown-unknown")?;
    if !status.success() {
        bail!(
            "cargo build of the hydrate bundle failed ({status}); is the target installed? rustup target add wasm32-unknown-unknown"
        );
    }
    let wasm = target_dir.join("wasm32-unknown-unknown/wasm-release/app.wasm");
    let pkg = out.join("pkg");
    std::fs::create_dir_all(&pkg).with_context(|| format!("creating {}", pkg.display()))?;
    wasm_bindgen_cli_support::Bindgen::new()
        .input_path(&wasm)
        .out_name("gatehouse")
        .web(true)?
        .omit_default_module_path(false)
        .generate(&pkg)
        .with_context(|| format!("wasm-bindgen on {}", wasm.display()))?;
    for f in ["gatehouse.js", "gatehouse_bg.wasm"] {
        let p = pkg.join(f);
        let len = std::fs::metadata(&p).with_context(|| format!("expected {}", p.display()))?.len();
        println!("build-site: {} ({} KiB)", p.display(), len / 1024);
    }
    Ok(())
}
