//! Output: the batch bodies (gzip members and their index), the Parquet file, the manifest.

use super::*;

/// The columns of `events.parquet`.
pub fn parquet_schema() -> SchemaRef {
    let s = |n: &str, nullable| Field::new(n, DataType::Utf8, nullable);
    Arc::new(Schema::new(vec![
        s("uuid", false),
        s("event", false),
        s("distinct_id", false),
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        s("properties", false),
        s("elements_chain", false),
        s("$session_id", true),
        s("$window_id", true),
        s("person_id", false),
        s("$group_0", true),
    ]))
}

pub(super) struct RowBuilder {
    pub(super) uuid: StringBuilder,
    pub(super) event: StringBuilder,
    pub(super) distinct_id: StringBuilder,
    pub(super) timestamp: TimestampMicrosecondBuilder,
    pub(super) properties: StringBuilder,
    pub(super) elements_chain: StringBuilder,
    pub(super) session_id: StringBuilder,
    pub(super) window_id: StringBuilder,
    pub(super) person_id: StringBuilder,
    pub(super) group_0: StringBuilder,
    pub(super) len: usize,
}

impl RowBuilder {
    pub(super) fn new() -> Self {
        RowBuilder {
            uuid: StringBuilder::new(),
            event: StringBuilder::new(),
            distinct_id: StringBuilder::new(),
            timestamp: TimestampMicrosecondBuilder::new().with_timezone("UTC"),
            properties: StringBuilder::new(),
            elements_chain: StringBuilder::new(),
            session_id: StringBuilder::new(),
            window_id: StringBuilder::new(),
            person_id: StringBuilder::new(),
            group_0: StringBuilder::new(),
            len: 0,
        }
    }

    pub(super) fn push(&mut self, r: &Row) {
        self.uuid.append_value(&r.uuid);
        self.event.append_value(r.event);
        self.distinct_id.append_value(&r.distinct_id);
        self.timestamp.append_value(r.timestamp_us);
        self.properties.append_value(&r.properties);
        self.elements_chain.append_value(&r.elements_chain);
        self.session_id.append_value(&r.session_id);
        self.window_id.append_value(&r.window_id);
        self.person_id.append_value(&r.person_id);
        self.group_0.append_option(r.group_0.as_deref());
        self.len += 1;
    }

    pub(super) fn finish(&mut self) -> RecordBatch {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.uuid.finish()),
            Arc::new(self.event.finish()),
            Arc::new(self.distinct_id.finish()),
            Arc::new(self.timestamp.finish()),
            Arc::new(self.properties.finish()),
            Arc::new(self.elements_chain.finish()),
            Arc::new(self.session_id.finish()),
            Arc::new(self.window_id.finish()),
            Arc::new(self.person_id.finish()),
            Arc::new(self.group_0.finish()),
        ];
        self.len = 0;
        RecordBatch::try_new(parquet_schema(), cols).expect("columns match")
    }
}

pub(super) fn io_err(path: &Path) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", path.display())
}

/// Generates the data set into `out` (created if missing).
pub fn generate(cfg: &GenConfig, out: &Path) -> Result<GenSummary, String> {
    if cfg.events == 0 {
        return Err("--events must be at least 1".into());
    }
    if cfg.events > u32::MAX as u64 {
        return Err(format!("--events is at most {}", u32::MAX));
    }
    if cfg.batch_size == 0 {
        return Err("--batch-size must be at least 1".into());
    }
    let (_, w_end) = window(cfg);
    let latest_ok = Utc::now().timestamp_millis() - 49 * 3_600_000;
    if w_end > latest_ok {
        return Err(format!(
            "the window {} + {} days reaches into the last 48 hours; historical_migration needs older events",
            cfg.start, cfg.days
        ));
    }
    std::fs::create_dir_all(out).map_err(io_err(out))?;
    let world = simulate(cfg);
    if let Some(last) = world.events.last()
        && last.ts_ms > latest_ok
    {
        return Err(format!(
            "the busiest persons ran past the window into the last 48 hours ({}); use an earlier --start",
            iso(last.ts_ms)
        ));
    }

    let gz_path = out.join("batches.jsonl.gz");
    let idx_path = out.join("batches.idx");
    let pq_path = out.join("events.parquet");
    let tmp = |p: &PathBuf| p.with_extension("tmp");
    let mut gz = BufWriter::new(File::create(tmp(&gz_path)).map_err(io_err(&gz_path))?);
    let mut idx = BufWriter::new(File::create(tmp(&idx_path)).map_err(io_err(&idx_path))?);
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).expect("level")))
        .set_max_row_group_row_count(Some(128 * 1024))
        .build();
    let pq_file = File::create(tmp(&pq_path)).map_err(io_err(&pq_path))?;
    let mut writer = ArrowWriter::try_new(pq_file, parquet_schema(), Some(props))
        .map_err(|e| format!("{}: {e}", pq_path.display()))?;
    let mut rows = RowBuilder::new();
    let mut offset = 0u64;
    let mut json_bytes = 0u64;
    let mut batches = 0u64;
    let mut counts = vec![0u64; KINDS.len()];
    // Events per person under its identified id and under its first device's anonymous id.
    let mut by_user: Vec<u64> = vec![0; world.persons.len()];
    let mut by_anon: Vec<u64> = vec![0; world.persons.len()];
    for chunk in world.events.chunks(cfg.batch_size) {
        let mut batch = Vec::with_capacity(chunk.len());
        for e in chunk {
            let r = world.render(cfg, e);
            counts[KINDS.iter().position(|k| *k == e.kind).expect("kind")] += 1;
            if e.identified {
                by_user[e.person as usize] += 1;
            } else if e.device == 0 {
                by_anon[e.person as usize] += 1;
            }
            rows.push(&r.row);
            if rows.len >= 64 * 1024 {
                writer
                    .write(&rows.finish())
                    .map_err(|e| format!("{}: {e}", pq_path.display()))?;
            }
            batch.push(r.capture);
        }
        let mut body = serde_json::to_vec(&json!({
            "api_key": cfg.api_key,
            "historical_migration": true,
            "batch": batch,
        }))
        .expect("json");
        body.push(b'\n');
        json_bytes += body.len() as u64;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&body).map_err(io_err(&gz_path))?;
        let member = enc.finish().map_err(io_err(&gz_path))?;
        gz.write_all(&member).map_err(io_err(&gz_path))?;
        writeln!(idx, "{offset}\t{}\t{}", member.len(), chunk.len()).map_err(io_err(&idx_path))?;
        offset += member.len() as u64;
        batches += 1;
    }
    if rows.len > 0 {
        writer
            .write(&rows.finish())
            .map_err(|e| format!("{}: {e}", pq_path.display()))?;
    }
    writer
        .close()
        .map_err(|e| format!("{}: {e}", pq_path.display()))?;
    gz.flush().map_err(io_err(&gz_path))?;
    idx.flush().map_err(io_err(&idx_path))?;
    drop((gz, idx));
    for p in [&gz_path, &idx_path, &pq_path] {
        std::fs::rename(tmp(p), p).map_err(io_err(p))?;
    }
    // The distinct_id with the most events: a stable point-lookup target.
    let busiest = |counts: &[u64]| {
        (0..counts.len())
            .max_by(|a, b| counts[*a].cmp(&counts[*b]).then(b.cmp(a)))
            .unwrap_or(0)
    };
    let (u, a) = (busiest(&by_user), busiest(&by_anon));
    let top_distinct_id = if by_user[u] >= by_anon[a] {
        user_id(cfg.seed, u as u32)
    } else {
        anon_id(cfg.seed, a as u32, &world.persons[a].devices[0], 0)
    };
    let summary = GenSummary {
        events: world.events.len() as u64,
        persons: world.persons.len() as u64,
        sessions: world.sessions.len() as u64,
        batches,
        json_bytes,
        gzip_bytes: offset,
        first_timestamp: world
            .events
            .first()
            .map(|e| iso(e.ts_ms))
            .unwrap_or_default(),
        last_timestamp: world
            .events
            .last()
            .map(|e| iso(e.ts_ms))
            .unwrap_or_default(),
        event_counts: KINDS
            .iter()
            .zip(&counts)
            .map(|(k, c)| (k.name().to_owned(), *c))
            .collect(),
        top_distinct_id,
    };
    let manifest = json!({
        "generator": "hedgerow gen",
        "version": 2,
        "events": cfg.events,
        "seed": cfg.seed,
        "start": cfg.start.to_string(),
        "days": cfg.days,
        "api_key": cfg.api_key,
        "batch_size": cfg.batch_size,
        "companies": world.n_companies,
        "summary": summary,
    });
    let man_path = out.join("manifest.json");
    std::fs::write(
        &man_path,
        serde_json::to_vec_pretty(&manifest).expect("json"),
    )
    .map_err(io_err(&man_path))?;
    Ok(summary)
}
