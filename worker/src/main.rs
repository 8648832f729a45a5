fn main() -> std::process::ExitCode {
    dls_worker::cli::main()
}
