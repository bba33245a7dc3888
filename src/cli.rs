//! The command line: `serve` (default), `keys create|list|revoke`, `schema`, `query`, `gen`.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use hedgerow_engine::Engine;
use hedgerow_engine::clock::{Clock, SystemClock};
use hedgerow_engine::model::TeamId;
use tracing::{error, info};

use crate::config::{
    Cli, Command, GenArgs, KeysCommand, OutputFormat, QueryArgs, ServeArgs, TasksCommand,
};

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
            let projects: Vec<TeamId> = projects.into_iter().map(TeamId).collect();
            let made = Engine::create_personal_key(
                &data_dir,
                &label,
                &scopes,
                (!projects.is_empty()).then_some(&projects[..]),
                SystemClock.now(),
            );
            match made {
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
        Some(Command::Keys(KeysCommand::List { data_dir })) => {
            match Engine::personal_keys(&data_dir) {
                Ok(keys) => {
                    println!("id\tlabel\tkey\tscopes\tprojects\tcreated_at");
                    for k in keys {
                        let projects = k.projects.map_or_else(
                            || "all".to_owned(),
                            |p| {
                                p.iter()
                                    .map(|t| t.0.to_string())
                                    .collect::<Vec<_>>()
                                    .join(",")
                            },
                        );
                        println!(
                            "{}\t{}\t{}\t{}\t{projects}\t{}",
                            k.id,
                            k.label,
                            k.mask,
                            k.scopes.join(","),
                            k.created_at
                        );
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("hedgerow: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Some(Command::Keys(KeysCommand::Revoke { id, data_dir })) => {
            match Engine::revoke_personal_key(&data_dir, id) {
                Ok(Some(k)) => {
                    println!(
                        "revoked personal API key {} ({}, {})",
                        k.id, k.label, k.mask
                    );
                    ExitCode::SUCCESS
                }
                Ok(None) => {
                    eprintln!(
                        "hedgerow: no personal API key has id {id} (see `hedgerow keys list`)"
                    );
                    ExitCode::from(2)
                }
                Err(e) => {
                    eprintln!("hedgerow: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Some(Command::Query(args)) => query(args),
        Some(Command::Gen(args)) => gen_data(args),
        Some(Command::Tasks(TasksCommand::Run {
            url,
            personal_api_key,
            data_dir,
        })) => tasks_run(url, personal_api_key, data_dir),
        Some(Command::Schema) => {
            let json = hedgerow_engine::schema_json();
            println!("{}", serde_json::to_string_pretty(&json).expect("json"));
            ExitCode::SUCCESS
        }
    }
}

fn gen_data(args: GenArgs) -> ExitCode {
    let cfg = hedgerow_engine::datagen::GenConfig {
        events: args.events,
        seed: args.seed,
        start: args.start,
        days: args.days,
        api_key: args.project_api_key,
        batch_size: args.batch_size,
    };
    let started = std::time::Instant::now();
    match hedgerow_engine::datagen::generate(&cfg, &args.out) {
        Ok(s) => {
            println!(
                "generated {} events ({} persons, {} sessions, {} batches, {:.1} MB JSON, {:.1} MB gzip) from {} to {} into {} in {:.1}s",
                s.events,
                s.persons,
                s.sessions,
                s.batches,
                s.json_bytes as f64 / 1e6,
                s.gzip_bytes as f64 / 1e6,
                s.first_timestamp,
                s.last_timestamp,
                args.out.display(),
                started.elapsed().as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hedgerow gen: {e}");
            ExitCode::from(2)
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

/// The multi-threaded runtime every command runs on; `None` (reported) when it cannot start.
fn runtime() -> Option<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| eprintln!("hedgerow: cannot start the runtime: {e}"))
        .ok()
}

/// POSTs to a running server's management API; its error `detail` becomes the message.
async fn post_api(
    url: &url::Url,
    key: Option<&str>,
    path: &str,
    body: Option<&serde_json::Value>,
) -> Result<serde_json::Value, String> {
    let key = key.ok_or("--url needs --personal-api-key (or HEDGEROW_PERSONAL_API_KEY)")?;
    let endpoint = url.join(path).map_err(|e| e.to_string())?;
    let mut req = reqwest::Client::new().post(endpoint).bearer_auth(key);
    if let Some(b) = body {
        req = req.json(b);
    }
    let resp = req
        .send()
        .await
        .map_err(|e| format!("cannot reach {url}: {e}"))?;
    let status = resp.status();
    let v: serde_json::Value = resp.json().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(v["detail"].as_str().unwrap_or(&v.to_string()).to_string());
    }
    Ok(v)
}

fn serve(args: ServeArgs) -> ExitCode {
    init_logging(&args.log);
    let Some(rt) = runtime() else {
        return ExitCode::FAILURE;
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
        .bootstrap(
            args.project_api_key.as_deref(),
            args.personal_api_key.as_deref(),
        )
        .map_err(|e| e.to_string())?;
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
    if args.deletion_schedule.trim() != "off" {
        let when = hedgerow_engine::schedule::Weekly::parse(&args.deletion_schedule)?;
        engine.spawn_deletion_scheduler(when);
    }
    if !args.cohort_interval.is_zero() {
        engine.spawn_cohort_scheduler(args.cohort_interval);
    }
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

fn tasks_run(url: Option<url::Url>, key: Option<String>, data_dir: std::path::PathBuf) -> ExitCode {
    init_logging("warn");
    let Some(rt) = runtime() else {
        return ExitCode::FAILURE;
    };
    let result = rt.block_on(async move {
        if let Some(url) = url {
            return post_api(&url, key.as_deref(), "/api/deletion_tasks/run/", None).await;
        }
        let engine = Engine::open(
            hedgerow_engine::EngineConfig::new(&data_dir),
            Arc::new(SystemClock),
        )
        .await
        .map_err(|e| format!("{e} (is a server running on it? then use --url)"))?;
        let run = engine.run_deletion_tasks().await;
        engine.shutdown().await;
        run.map(|r| serde_json::to_value(r).unwrap_or_default())
            .map_err(|e| e.to_string())
    });
    match result {
        Ok(v) => {
            println!("{v}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hedgerow: {e}");
            ExitCode::from(2)
        }
    }
}

fn query(args: QueryArgs) -> ExitCode {
    init_logging("warn");
    let Some(rt) = runtime() else {
        return ExitCode::FAILURE;
    };
    let format = args.format;
    match rt.block_on(run_query(args)) {
        Ok(serde_json::Value::String(explained)) => {
            println!("{explained}");
            ExitCode::SUCCESS
        }
        Ok(resp) => {
            print!("{}", render(&resp, format));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hedgerow: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run_query(args: QueryArgs) -> Result<serde_json::Value, String> {
    let body = serde_json::json!({"query": {"kind": "HogQLQuery", "query": args.hogql}, "refresh": "force_blocking"});
    if let Some(url) = &args.url {
        let path = format!("/api/projects/{}/query/", args.project);
        return post_api(url, args.personal_api_key.as_deref(), &path, Some(&body)).await;
    }
    let cfg = hedgerow_engine::EngineConfig::new(&args.data_dir);
    let engine = Engine::open(cfg, Arc::new(SystemClock))
        .await
        .map_err(|e| format!("{e} (is a server running on it? then use --url)"))?;
    let result = async {
        let team = TeamId(args.project);
        if args.explain {
            return engine
                .explain_hogql(team, &args.hogql, args.explain_runs)
                .await
                .map(serde_json::Value::String)
                .map_err(|e| e.to_string());
        }
        let req = hedgerow_engine::query::QueryRequest {
            query: body["query"].clone(),
            refresh: hedgerow_engine::query::Refresh::ForceBlocking,
            client_query_id: None,
            name: Some("cli".into()),
        };
        let project = engine
            .project(team)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("no project {team}"))?;
        match engine.run_query(&project, req).await {
            Ok(hedgerow_engine::query::QueryOutcome::Done(r)) => {
                Ok(crate::http::wire::query::response(r))
            }
            Ok(hedgerow_engine::query::QueryOutcome::Running(_)) => {
                Err("query did not complete".to_string())
            }
            Ok(hedgerow_engine::query::QueryOutcome::Failed { error, .. }) | Err(error) => {
                Err(error.to_string())
            }
        }
    }
    .await;
    engine.shutdown().await;
    result
}

fn cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "NULL".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The response as a table, CSV or JSON.
fn render(resp: &serde_json::Value, format: OutputFormat) -> String {
    let columns: Vec<String> = resp["columns"]
        .as_array()
        .map(|c| c.iter().map(cell).collect())
        .unwrap_or_default();
    let rows: Vec<Vec<String>> = resp["results"]
        .as_array()
        .map(|r| {
            r.iter()
                .map(|row| {
                    row.as_array()
                        .map(|c| c.iter().map(cell).collect())
                        .unwrap_or_default()
                })
                .collect()
        })
        .unwrap_or_default();
    let more = resp["hasMore"].as_bool() == Some(true);
    match format {
        OutputFormat::Json => format!(
            "{}\n",
            serde_json::to_string_pretty(resp).unwrap_or_default()
        ),
        OutputFormat::Csv => {
            let esc = |s: &str| {
                if s.contains([',', '"', '\n', '\r']) {
                    format!("\"{}\"", s.replace('"', "\"\""))
                } else {
                    s.to_string()
                }
            };
            let mut out = String::new();
            for line in std::iter::once(&columns).chain(rows.iter()) {
                out.push_str(&line.iter().map(|c| esc(c)).collect::<Vec<_>>().join(","));
                out.push('\n');
            }
            out
        }
        OutputFormat::Table => {
            let mut width: Vec<usize> = columns.iter().map(|c| c.chars().count()).collect();
            for r in &rows {
                for (i, c) in r.iter().enumerate() {
                    if i < width.len() {
                        width[i] = width[i].max(c.chars().count().min(60));
                    }
                }
            }
            let line = |cells: &[String]| {
                cells
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let c: String = c.chars().take(60).collect();
                        format!("{c:<w$}", w = width.get(i).copied().unwrap_or(0))
                    })
                    .collect::<Vec<_>>()
                    .join(" | ")
            };
            let mut out = line(&columns) + "\n";
            out += &width
                .iter()
                .map(|w| "-".repeat(*w))
                .collect::<Vec<_>>()
                .join("-+-");
            out.push('\n');
            for r in &rows {
                out += &line(r);
                out.push('\n');
            }
            out += &format!(
                "({} row{}{})\n",
                rows.len(),
                if rows.len() == 1 { "" } else { "s" },
                if more {
                    ", more available: add LIMIT"
                } else {
                    ""
                }
            );
            out
        }
    }
}
