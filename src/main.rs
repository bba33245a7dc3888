fn main() -> std::process::ExitCode {
    hedgerow::cli::main()
}
