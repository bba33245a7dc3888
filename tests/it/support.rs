//! Starting the real binary and reading its table back.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use arrow::array::{Array, AsArray, RecordBatch};
use datafusion::prelude::SessionContext;

pub(crate) const TOKEN: &str = "phc_testtoken0000000000000000000000000000000";
pub(crate) const KEY: &str = "phx_testpersonalkey000000000000000000000000";

pub(crate) fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_hedgerow")
}

pub(crate) struct Server {
    pub child: Child,
    pub base: String,
    pub data_dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
}

impl Server {
    pub(crate) fn start(extra: &[&str]) -> Server {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let mut s = Server::start_in(&dir, extra);
        s._tmp = Some(tmp);
        s
    }

    /// Starts on an existing data directory (the caller keeps it alive).
    pub(crate) fn start_in(dir: &Path, extra: &[&str]) -> Server {
        Self::start_with(Command::new(bin()), dir, extra)
    }

    pub(crate) fn start_with(mut cmd: Command, dir: &Path, extra: &[&str]) -> Server {
        cmd.args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
            .arg(dir)
            .args(["--project-api-key", TOKEN, "--personal-api-key", KEY])
            .args(["--log", "warn"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if !extra.contains(&"--flush-interval") {
            cmd.args(["--flush-interval", "200ms"]);
        }
        let mut child = cmd.spawn().expect("spawn hedgerow");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("hedgerow listening on ") {
                    let _ = tx.send(addr.to_owned());
                }
            }
        });
        let base = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(b) => b,
            Err(_) => {
                let _ = child.kill();
                panic!("hedgerow did not start: {:?}", child.wait());
            }
        };
        Server {
            child,
            base,
            data_dir: dir.to_path_buf(),
            _tmp: None,
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// SIGTERM and wait: a clean stop flushes everything.
    pub(crate) fn stop(&mut self) {
        unsafe_kill(self.child.id(), "TERM");
        let status = self.child.wait().unwrap();
        assert!(status.success(), "hedgerow exited with {status}");
    }

    pub(crate) fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn unsafe_kill(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(ok.success());
}

pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .no_gzip()
        .build()
        .unwrap()
}

/// One stored event, as read back from the Delta table.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub uuid: String,
    pub event: String,
    pub distinct_id: String,
    pub timestamp_us: i64,
    pub team_id: i64,
    pub properties: serde_json::Value,
}

/// Reads every event of the table under `data_dir` (committed files only).
pub(crate) async fn read_table(data_dir: &Path) -> Vec<Stored> {
    let url =
        url::Url::from_directory_path(data_dir.canonicalize().unwrap().join("events")).unwrap();
    let table = deltalake::open_table(url).await.expect("open table");
    let ctx = SessionContext::new();
    ctx.register_table("events", table.table_provider().await.unwrap())
        .unwrap();
    let batches: Vec<RecordBatch> = ctx
        .sql("SELECT uuid, event, distinct_id, CAST(timestamp AS BIGINT) AS ts, team_id, properties FROM events")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let mut out = Vec::new();
    for b in batches {
        let s = |i: usize| text_column(b.column(i));
        let (uuid, event, did, props) = (s(0), s(1), s(2), s(5));
        let ts = b.column(3).as_primitive::<arrow::datatypes::Int64Type>();
        let team = b.column(4).as_primitive::<arrow::datatypes::Int64Type>();
        for r in 0..b.num_rows() {
            out.push(Stored {
                uuid: uuid[r].clone(),
                event: event[r].clone(),
                distinct_id: did[r].clone(),
                timestamp_us: ts.value(r),
                team_id: team.value(r),
                properties: serde_json::from_str(&props[r]).unwrap(),
            });
        }
    }
    out
}

/// A column as text, as an outside reader gets it: strings as they are, ids (16-byte binary,
/// Parquet's UUID type, `binary` to Delta) as lowercase hyphenated UUIDs.
pub(crate) fn text_column(a: &arrow::array::ArrayRef) -> Vec<String> {
    let uuid = |b: &[u8]| {
        uuid::Uuid::from_slice(b)
            .expect("a 16-byte id")
            .hyphenated()
            .to_string()
    };
    let all = |f: &dyn Fn(usize) -> String| (0..a.len()).map(f).collect::<Vec<_>>();
    if let Some(s) = a.as_string_opt::<i32>() {
        all(&|r| s.value(r).to_owned())
    } else if let Some(s) = a.as_string_view_opt() {
        all(&|r| s.value(r).to_owned())
    } else if let Some(b) = a.as_binary_opt::<i32>() {
        all(&|r| uuid(b.value(r)))
    } else if let Some(b) = a.as_binary_view_opt() {
        all(&|r| uuid(b.value(r)))
    } else if let Some(b) = a.as_fixed_size_binary_opt() {
        all(&|r| uuid(b.value(r)))
    } else {
        panic!("not a text or id column: {}", a.data_type())
    }
}

pub(crate) fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// A value of a Prometheus series from `/metrics` text (0 when absent).
pub(crate) fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// A personal key made with `hedgerow keys create` (the server may be running).
pub(crate) fn create_key(
    data_dir: &std::path::Path,
    scopes: &str,
    projects: Option<&str>,
) -> String {
    let mut cmd = std::process::Command::new(bin());
    cmd.args(["keys", "create", "--scopes", scopes, "--data-dir"])
        .arg(data_dir);
    if let Some(p) = projects {
        cmd.args(["--projects", p]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}
