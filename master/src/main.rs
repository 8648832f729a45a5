use clap::Parser;

fn main() -> std::process::ExitCode {
    match dls_master::cli::run(dls_master::cli::args::Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
