//! Capture: a request's body (or a decoded payload) in, a durable receipt out.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tracing::warn;

use crate::Engine;
use crate::HISTORICAL_MIN_AGE;
use crate::ingest::CaptureError;
use crate::ingest::decode::{RawBody, decode_transport, decoded_bound, may_inflate, parse_json};
use crate::ingest::limits::{MAX_JSON_DEPTH, check_event_limits, decode_cost, scan_refusal};
use crate::ingest::normalize::{NormalizeContext, Outcome, normalize_event};
use crate::ingest::payload::{CapturePayload, parse_payload};
use crate::ingest::scan::{JsonShape, scan};
use crate::ingest::wal::WalError;
use crate::model::IngestBatch;
use crate::write::QueueFull;
use crate::write::{Ingested, to_arrow};

/// What a capture call accepted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CaptureReceipt {
    pub accepted: usize,
    pub skipped: usize,
    /// WAL sequence of the record, when anything was written.
    pub seq: Option<u64>,
}

/// A capture request's body and the transport hints that say how to decode it, owned so
/// the work can move to the blocking pool.
#[derive(Debug, Clone, Default)]
pub struct CaptureBody {
    pub body: bytes::Bytes,
    pub content_type: Option<String>,
    pub content_encoding: Option<String>,
    /// `?compression=`.
    pub compression: Option<String>,
    /// `?data=` of a legacy GET request.
    pub data_param: Option<String>,
    /// `?_=` (milliseconds), used when the body has no `sent_at`.
    pub sent_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl CaptureBody {
    pub(crate) fn raw(&self) -> RawBody<'_> {
        RawBody {
            body: &self.body,
            content_type: self.content_type.as_deref(),
            content_encoding: self.content_encoding.as_deref(),
            compression: self.compression.as_deref(),
            data_param: self.data_param.as_deref(),
        }
    }
}

/// A WAL record made ready off the async path: its bytes and its Arrow rows.
struct WalRecord {
    events: u64,
    bytes: Vec<u8>,
    ingested: Ingested,
}

/// A normalized capture request, ready for the WAL (`None`: nothing to write).
struct PreparedCapture {
    record: Option<(WalRecord, usize)>,
    skipped: usize,
}

/// Runs `f` on tokio's blocking pool when `blocking`, else right here.
async fn off_worker<T: Send + 'static>(
    blocking: bool,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, CaptureError> {
    if !blocking {
        return Ok(f());
    }
    tokio::task::spawn_blocking(f)
        .await
        .map_err(CaptureError::Task)
}

impl Engine {
    /// Decodes, checks and stores one capture request's body, within the capture limits
    /// (`ingest::limits`): the body's decoding may take memory only from the shared budget;
    /// its JSON is counted by the pre-scan before it is parsed; events over the property
    /// limits refuse the request. A big body, or one that may inflate, is decoded, parsed
    /// and normalized on the blocking pool, so the async workers keep serving other
    /// requests. Returns once the events are durable.
    pub async fn capture_body(
        self: &Arc<Self>,
        body: CaptureBody,
    ) -> Result<CaptureReceipt, CaptureError> {
        let limits = &self.cfg.capture;
        let (wire, bound, inflates) = {
            let raw = body.raw();
            let wire = raw.body.len() + raw.data_param.map_or(0, str::len);
            (
                wire,
                decoded_bound(&raw, limits.max_body),
                may_inflate(&raw),
            )
        };
        // What decoding can allocate before the scan knows better: the wire bytes and the
        // most the decoded text can be. Capped by the budget so a small budget still lets
        // one request at a time through.
        let first = (wire + bound).min(self.budget.total_bytes());
        let mut permit = self.budget.acquire(first).await?;
        let (max_body, max_values) = (limits.max_body, limits.max_json_values);
        let sent_at = body.sent_at;
        let (json, shape) = off_worker(inflates || wire > limits.blocking_threshold, move || {
            let decoded = decode_transport(&body.raw(), max_body)?;
            let shape = scan(&decoded, max_values, MAX_JSON_DEPTH).map_err(scan_refusal)?;
            let json = match decoded {
                std::borrow::Cow::Borrowed(b) => body.body.slice_ref(b),
                std::borrow::Cow::Owned(v) => bytes::Bytes::from(v),
            };
            Ok::<(bytes::Bytes, JsonShape), CaptureError>((json, shape))
        })
        .await??;
        permit
            .resize(&self.budget, decode_cost(wire, &shape))
            .await?;
        let this = self.clone();
        let prepared = off_worker(json.len() > limits.blocking_threshold, move || {
            let value = parse_json(&json)?;
            drop(json);
            this.prepare_capture(parse_payload(value, sent_at)?)
        })
        .await??;
        let receipt = self.commit_capture(prepared).await;
        drop(permit);
        receipt
    }

    /// Normalizes a decoded capture request and makes it durable. Returns once the events
    /// are fsynced in the WAL: the caller may then acknowledge them. Runs on the caller's
    /// thread and takes nothing from the capture budget: [`Engine::capture_body`] is the
    /// way in for request bodies.
    pub async fn capture(&self, payload: CapturePayload) -> Result<CaptureReceipt, CaptureError> {
        let prepared = self.prepare_capture(payload)?;
        self.commit_capture(prepared).await
    }

    /// Everything of a capture up to the WAL append, synchronously (it may run on the
    /// blocking pool): the token's project, normalization, the property limits, the WAL
    /// record's bytes and the Arrow rows.
    fn prepare_capture(&self, payload: CapturePayload) -> Result<PreparedCapture, CaptureError> {
        let project = self
            .project_for_token(&payload.token)
            .map_err(|e| CaptureError::ProjectLookup(Box::new(e)))?
            .ok_or_else(|| {
                self.metrics.reject("invalid_api_key", 1);
                CaptureError::InvalidToken(
                    "Project API key invalid: no project has this token. Find your project API key in the project's settings (GET /api/projects/).".into(),
                )
            })?;
        let now = self.clock.now();
        let ctx = NormalizeContext {
            team_id: project.id,
            now,
            sent_at: payload.sent_at,
        };
        let max_properties = self.cfg.capture.max_properties;
        let mut events = Vec::with_capacity(payload.events.len());
        let mut skipped = 0usize;
        for (i, raw) in payload.events.into_iter().enumerate() {
            match normalize_event(raw, &ctx) {
                Ok(Outcome::Event(e)) => {
                    check_event_limits(i, &e, max_properties)?;
                    events.push(e)
                }
                Ok(Outcome::Skipped(reason)) => {
                    skipped += 1;
                    self.metrics.reject(reason.as_str(), 1);
                }
                Err(e) => {
                    self.metrics.reject("invalid_payload", 1);
                    return Err(e);
                }
            }
        }
        if payload.historical_migration {
            let too_recent = events
                .iter()
                .filter(|e| now - e.timestamp < HISTORICAL_MIN_AGE)
                .count();
            if too_recent > 0 {
                // Kept, as live events: refusing them would lose data the caller was told
                // is stored; the counter and the log say it happened.
                self.metrics
                    .historical_too_recent
                    .fetch_add(too_recent as u64, Ordering::Relaxed);
                warn!(
                    team_id = project.id.0,
                    events = too_recent,
                    "historical_migration events younger than 48 h, ingested as live events"
                );
            }
        }
        if events.is_empty() {
            return Ok(PreparedCapture {
                record: None,
                skipped,
            });
        }
        let accepted = events.len();
        let batch = IngestBatch {
            team_id: project.id,
            historical: payload.historical_migration,
            events,
            command: None,
            actor: None,
        };
        let record = self.prepare_record(&batch)?;
        Ok(PreparedCapture {
            record: Some((record, accepted)),
            skipped,
        })
    }

    /// Appends a prepared capture to the WAL and waits until it is durable.
    async fn commit_capture(&self, p: PreparedCapture) -> Result<CaptureReceipt, CaptureError> {
        let Some((record, accepted)) = p.record else {
            return Ok(CaptureReceipt {
                accepted: 0,
                skipped: p.skipped,
                seq: None,
            });
        };
        let seq = self.append_record(record).await?;
        self.metrics
            .events_accepted
            .fetch_add(accepted as u64, Ordering::Relaxed);
        self.metrics
            .requests_accepted
            .fetch_add(1, Ordering::Relaxed);
        Ok(CaptureReceipt {
            accepted,
            skipped: p.skipped,
            seq: Some(seq),
        })
    }

    /// Makes one record durable in the WAL; the pipeline applies it in order.
    pub(super) async fn append_batch(&self, batch: &IngestBatch) -> Result<u64, CaptureError> {
        let record = self.prepare_record(batch)?;
        self.append_record(record).await
    }

    /// A WAL record's bytes and its Arrow rows. The Arrow conversion runs here, on the
    /// request's thread (a worker, or the blocking pool for a big body), so it spreads over
    /// all cores instead of loading the single pipeline consumer.
    fn prepare_record(&self, batch: &IngestBatch) -> Result<WalRecord, CaptureError> {
        let bytes =
            serde_json::to_vec(batch).map_err(|e| CaptureError::InvalidPayload(e.to_string()))?;
        Ok(WalRecord {
            events: batch.events.len() as u64,
            bytes,
            ingested: to_arrow(&self.meta, batch),
        })
    }

    async fn append_record(&self, mut r: WalRecord) -> Result<u64, CaptureError> {
        let cost = r.bytes.len()
            + r.ingested
                .batch
                .as_ref()
                .map_or(0, |b| b.get_array_memory_size());
        r.ingested.queued = Some(self.queue.hold(cost).await.map_err(|e| {
            self.metrics.reject("unavailable", r.events);
            match e {
                QueueFull::Closed => CaptureError::Unavailable("the server is shutting down".into()),
                QueueFull::Waited(w) => CaptureError::Overloaded(format!(
                    "the write pipeline took no records for {} s (a slow or failing flush); nothing of this request was stored, retry later",
                    w.as_secs()
                )),
            }
        })?);
        let seq = self
            .wal
            .append(r.bytes, r.ingested)
            .await
            .map_err(|e| match e {
                e @ WalError::TooLarge(_) => CaptureError::TooLarge(e.to_string()),
                // The I/O error names the segment's path, which is no business of an
                // anonymous client (the WAL logged it whole): its kind says enough, e.g.
                // "no storage space", "read-only filesystem or storage medium".
                WalError::Io(e) => {
                    self.metrics.reject("unavailable", r.events);
                    CaptureError::Unavailable(format!(
                        "the write-ahead log could not be written ({})",
                        e.kind()
                    ))
                }
                other => {
                    self.metrics.reject("unavailable", r.events);
                    CaptureError::Unavailable(other.to_string())
                }
            })?;
        crate::faults::point("capture.durable");
        Ok(seq)
    }
}
