fn main() -> std::process::ExitCode {
    dls_master::cli::main()
}
