use clap::Parser;
use std::io::IsTerminal;

fn main() -> std::process::ExitCode {
    // Warnings (a worker lost, say) by default; RUST_LOG for more. Colour
    // only on a terminal.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match dls_master::cli::run(dls_master::cli::args::Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
