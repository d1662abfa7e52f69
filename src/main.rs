use std::process::ExitCode;

/// mimalloc: a capture parses on one thread what another seals and frees,
/// which glibc's allocator paid for in arena locks (see Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    git_session::cli::main()
}
