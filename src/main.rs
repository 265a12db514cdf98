//! The `rocmatrix` binary: parse arguments, run, map errors to exit codes.

use clap::Parser;
use rocmatrix::cli::Cli;
use rocmatrix::ExitCode;

/// The system allocator, keeping the memory budget of template rendering
/// (`src/budget.rs`).
#[global_allocator]
static ALLOCATOR: rocmatrix::budget::Budgeted = rocmatrix::budget::Budgeted;

fn main() {
    let cli = Cli::parse();
    let filter = match cli.verbose {
        0 => "rocmatrix=info",
        1 => "rocmatrix=debug",
        _ => "rocmatrix=trace",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ROCMATRIX_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter)),
        )
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .init();
    // The process's one runtime; commands that talk to the engine run on it.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the tokio runtime: {e}");
            std::process::exit(ExitCode::Infrastructure.code());
        }
    };
    let mut stdout = std::io::stdout().lock();
    let code = match cli.run(&runtime, &mut stdout) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    };
    std::process::exit(code.code());
}
