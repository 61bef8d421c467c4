use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = memlint::cli::Cli::parse();
    match memlint::commands::run(cli) {
        Ok(code) => code,
        Err(err) => {
            memlint::commands::eprint_diagnostic(&err);
            ExitCode::from(2)
        }
    }
}
