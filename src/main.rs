use std::process::ExitCode;

fn main() -> ExitCode {
    git_session::cli::main()
}
