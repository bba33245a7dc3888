//! The command line: `serve` (default), `keys create`, `schema`.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use hedgerow_engine::Engine;
use hedgerow_engine::clock::{Clock, SystemClock};
use hedgerow_engine::ingest::TeamId;
use hedgerow_engine::meta::MetaStore;
use tracing::{error, info};

use crate::config::{Cli, Command, KeysCommand, ServeArgs};

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        None => serve(cli.serve),
        Some(Command::Serve(args)) => serve(*args),
        Some(Command::Keys(KeysCommand::Create {
            scopes,
            projects,
            label,
            data_dir,
        })) => {
            let run = || -> Result<String, String> {
                std::fs::create_dir_all(&data_dir).map_err(|e| e.to_string())?;
                let meta =
                    MetaStore::open(&data_dir.join("meta.sqlite")).map_err(|e| e.to_string())?;
                let projects: Vec<TeamId> = projects.into_iter().map(TeamId).collect();
                let (secret, _) = meta
                    .create_key(
                        &label,
                        &scopes,
                        (!projects.is_empty()).then_some(&projects[..]),
                        SystemClock.now(),
                    )
                    .map_err(|e| e.to_string())?;
                Ok(secret)
            };
            match run() {
                Ok(secret) => {
                    println!("{secret}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("hedgerow: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Some(Command::Schema) => {
            let json = hedgerow_engine::storage::schema::schema_json();
            println!("{}", serde_json::to_string_pretty(&json).expect("json"));
            ExitCode::SUCCESS
        }
    }
}

fn init_logging(filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn serve(args: ServeArgs) -> ExitCode {
    init_logging(&args.log);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hedgerow: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run_server(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e}");
            eprintln!("hedgerow: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run_server(args: ServeArgs) -> Result<(), String> {
    let cfg = args.engine_config()?;
    let engine = Engine::open(cfg, Arc::new(SystemClock))
        .await
        .map_err(|e| e.to_string())?;
    let engine = Arc::new(engine);
    let boot = engine
        .meta()
        .bootstrap(
            args.project_api_key.as_deref(),
            args.personal_api_key.as_deref(),
            engine.clock().now(),
        )
        .map_err(|e| e.to_string())?;
    engine.forget_tokens();
    if let Some(p) = &boot.created_project {
        println!(
            "created project {} ({}); project API key: {}",
            p.id, p.name, p.api_token
        );
    }
    if let Some(k) = &boot.created_personal_key {
        println!("created a personal API key with every scope (shown once): {k}");
    }
    // Handle SIGTERM from before the address is announced: a supervisor may stop us at once.
    let stop = shutdown_signal()?;
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    println!("hedgerow listening on http://{addr}");
    info!(%addr, data_dir = %engine.config().data_dir.display(), "listening");
    let app = crate::http::router(crate::http::App::new(
        engine.clone(),
        args.max_body_size as usize,
    ));
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await;
    info!("stopping: flushing buffered events");
    engine.shutdown().await;
    info!("stopped");
    served.map_err(|e| e.to_string())
}

fn shutdown_signal() -> Result<impl Future<Output = ()>, String> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term =
        signal(SignalKind::terminate()).map_err(|e| format!("cannot handle SIGTERM: {e}"))?;
    let mut int =
        signal(SignalKind::interrupt()).map_err(|e| format!("cannot handle SIGINT: {e}"))?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {},
            _ = int.recv() => {},
        }
    })
}
