/// mimalloc rather than glibc's malloc: measured on a 10M-event ingest, see
/// docs/architecture.md ("Memory while ingesting").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    hedgerow::cli::main()
}
