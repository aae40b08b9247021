//! The `gatehouse` binary; everything lives in the `gatehouse` library.

fn main() -> std::process::ExitCode {
    gatehouse::cli::main()
}
