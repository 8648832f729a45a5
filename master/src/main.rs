use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = dls_master::cli::args::Cli::parse();
    // Warnings (a worker lost, say) by default; RUST_LOG for more. Colour
    // only on a terminal, never with NO_COLOR.
    dls_worker::init_logging("warn", cli.log_format);
    match dls_master::cli::run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
