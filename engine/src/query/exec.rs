//! Where queries run: a runtime of their own, apart from the one that serves HTTP and
//! capture, so one expensive query cannot make the service unresponsive.
//!
//! - **Own threads, lower priority.** Planning, DataFusion's optimizer and execution run on
//!   the `hedgerow-query` runtime. On Linux its threads run at nice +10, so when queries
//!   saturate every core, capture and `/_health` (nice 0) still get the CPU first (the
//!   scheduler weighs nice 0 about ten times nice 10).
//! - **Big stacks.** Planning and optimizing recurse over the query's tree. The parser
//!   bounds the nesting ([`crate::hogql::parser::MAX_DEPTH`], subqueries
//!   [`crate::hogql::parser::MAX_SUBQUERY_DEPTH`]), and these threads have a stack large
//!   enough for every stage at those bounds (tested at the limits in
//!   `tests/it/limits.rs`), so a deep query is an answer or a clear error, never a crash.
//! - **Bounded concurrency.** At most `concurrency` queries run at once (the rest wait
//!   for a slot); one project has at most `per_project` queries running or waiting, past
//!   that a query is refused at once with a 429, as PostHog answers.
//! - **A time limit.** A query still running after `timeout` (waiting included) is
//!   stopped and answers `query_timeout`.
//! - **Cancellation.** A cancelled token (DELETE, or a blocking client that went away)
//!   stops the query: the caller is answered at once, and the query's task is aborted at
//!   its next yield, which drops its DataFusion streams.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use datafusion::execution::memory_pool::MemoryPool;
use tokio::runtime::{Handle, Runtime};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::QueryError;
use crate::model::TeamId;

/// Stack of each query thread: reserved address space, touched only as deep as a query
/// goes. `tests/it/limits.rs` runs queries at the parser's bounds (512 levels of calls,
/// parentheses and operators, 100 nested FROM subqueries, 500-way UNION ALL) through every
/// stage in a debug build, whose frames are the largest.
pub(crate) const QUERY_STACK_BYTES: usize = 256 << 20;

/// How queries are admitted and bounded.
#[derive(Debug, Clone)]
pub struct QueryLimits {
    /// Queries running at once, over all projects.
    pub concurrency: usize,
    /// Queries one project may have running or waiting; more are refused (429).
    pub per_project: usize,
    /// The longest a query may take, from admission (waiting for a slot included).
    pub timeout: Duration,
    /// Threads of the query runtime.
    pub threads: usize,
    /// Query requests a project may make per minute (burst) and per hour (sustained);
    /// 0 is no limit. PostHog's query API: 240 a minute, 2 400 an hour.
    pub per_minute: u32,
    pub per_hour: u32,
}

impl Default for QueryLimits {
    fn default() -> Self {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2);
        Self {
            concurrency: cores.max(2),
            per_project: 8,
            timeout: Duration::from_secs(120),
            threads: cores,
            per_minute: 240,
            per_hour: 2400,
        }
    }
}

/// The query runtime and its admission rules.
pub(crate) struct Executor {
    runtime: Option<Runtime>,
    handle: Handle,
    slots: Arc<Semaphore>,
    running: Arc<Mutex<HashMap<TeamId, usize>>>,
    rates: Mutex<HashMap<TeamId, Rate>>,
    limits: QueryLimits,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("limits", &self.limits)
            .finish()
    }
}

impl Executor {
    /// `pool` is the query memory pool: string and array functions on these threads count
    /// their output against it ([`crate::hogql::functions::budget`]).
    pub(crate) fn new(
        limits: QueryLimits,
        pool: Option<Arc<dyn MemoryPool>>,
    ) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(limits.threads.max(1))
            .max_blocking_threads(limits.threads.max(1) * 4)
            .thread_name("hedgerow-query")
            .thread_stack_size(QUERY_STACK_BYTES)
            .on_thread_start(move || {
                lower_priority();
                if let Some(pool) = &pool {
                    crate::hogql::functions::budget::install_pool(pool.clone());
                }
            })
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        Ok(Self {
            runtime: Some(runtime),
            handle,
            slots: Arc::new(Semaphore::new(limits.concurrency.max(1))),
            running: Default::default(),
            rates: Default::default(),
            limits,
        })
    }

    /// Runs `work` on the query runtime under the admission rules. Answers as soon as the
    /// work finishes, `cancel` fires (`Cancelled`) or the time limit passes (`Timeout`);
    /// in the last two cases the work is stopped at its next yield.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        team: TeamId,
        cancel: &CancellationToken,
        work: impl Future<Output = Result<T, QueryError>> + Send + 'static,
    ) -> Result<T, QueryError> {
        let admitted = self.admit(team)?;
        self.run_admitted(admitted, cancel, work).await
    }

    /// Takes one of the project's places, or refuses (429) when it has none left. The
    /// place is given back when the returned value is dropped.
    pub(crate) fn admit(&self, team: TeamId) -> Result<Admitted, QueryError> {
        Admitted::new(team, &self.running, self.limits.per_project)
    }

    /// [`Self::run`] for a query already admitted.
    pub(crate) async fn run_admitted<T: Send + 'static>(
        &self,
        admitted: Admitted,
        cancel: &CancellationToken,
        work: impl Future<Output = Result<T, QueryError>> + Send + 'static,
    ) -> Result<T, QueryError> {
        let deadline = Instant::now() + self.limits.timeout;
        let timeout = self.limits.timeout;
        let slots = self.slots.clone();
        let stop = cancel.clone();
        let task = self.handle.spawn(async move {
            let _admitted = admitted;
            let _slot = tokio::select! {
                s = slots.acquire_owned() => s.map_err(|_| QueryError::Internal("the query runtime is shutting down".into()))?,
                _ = stop.cancelled() => return Err(QueryError::Cancelled(String::new())),
                _ = tokio::time::sleep_until(deadline.into()) => return Err(QueryError::Timeout(timeout)),
            };
            tokio::select! {
                r = work => r,
                _ = stop.cancelled() => Err(QueryError::Cancelled(String::new())),
                _ = tokio::time::sleep_until(deadline.into()) => Err(QueryError::Timeout(timeout)),
            }
        });
        let abort = task.abort_handle();
        // The caller is answered from here, on its own runtime, even while a query thread is
        // busy inside one long poll.
        let outcome = tokio::select! {
            r = task => match r {
                Ok(r) => r,
                Err(e) if e.is_panic() => {
                    let msg = panic_message(e.into_panic());
                    tracing::error!(panic = %msg, "a query panicked");
                    Err(QueryError::Internal("the query failed unexpectedly".into()))
                }
                Err(_) => Err(QueryError::Cancelled(String::new())),
            },
            _ = cancel.cancelled() => Err(QueryError::Cancelled(String::new())),
            _ = tokio::time::sleep_until(deadline.into()) => Err(QueryError::Timeout(timeout)),
        };
        if outcome.is_err() {
            abort.abort();
        }
        outcome
    }

    /// Counts one query request of `team` against its per-minute and per-hour budgets, or
    /// refuses it (429) with the seconds until the budget allows one more.
    pub(crate) fn count_request(&self, team: TeamId) -> Result<(), QueryError> {
        let mut rates = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        let rate = rates.entry(team).or_insert_with(|| Rate::new(&self.limits));
        rate.take(Instant::now()).map_err(|(window, limit, wait)| {
            QueryError::Throttled(
                format!(
                    "Request was throttled: this project may make {limit} query requests per \
                     {window} (--query-rate-per-{window}). Expected available in {wait} second{}.",
                    if wait == 1 { "" } else { "s" }
                ),
                wait,
            )
        })
    }

    /// Queries running or waiting, per project.
    #[cfg(test)]
    pub(crate) fn in_flight(&self, team: TeamId) -> usize {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        running.get(&team).copied().unwrap_or(0)
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        // Dropping a runtime blocks; the engine may be dropped inside another runtime.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// One project's place among its running or waiting queries; given back on drop.
pub(crate) struct Admitted {
    team: TeamId,
    running: Arc<Mutex<HashMap<TeamId, usize>>>,
}

impl Admitted {
    fn new(
        team: TeamId,
        running: &Arc<Mutex<HashMap<TeamId, usize>>>,
        limit: usize,
    ) -> Result<Self, QueryError> {
        let mut map = running.lock().unwrap_or_else(|e| e.into_inner());
        let n = map.entry(team).or_default();
        if *n >= limit.max(1) {
            return Err(QueryError::Throttled(
                format!(
                    "This project already has {n} queries running or waiting, the most allowed \
                 (--query-concurrency-per-project); retry when one has finished"
                ),
                1,
            ));
        }
        *n += 1;
        Ok(Self {
            team,
            running: running.clone(),
        })
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut map = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = map.get_mut(&self.team) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.team);
            }
        }
    }
}

/// A project's request budgets: two token buckets, refilled continuously.
#[derive(Debug)]
struct Rate {
    buckets: [(&'static str, f64, f64); 2],
    tokens: [f64; 2],
    at: Instant,
}

impl Rate {
    fn new(limits: &QueryLimits) -> Self {
        let minute = ("minute", limits.per_minute as f64, 60.0);
        let hour = ("hour", limits.per_hour as f64, 3600.0);
        Self {
            buckets: [minute, hour],
            tokens: [minute.1, hour.1],
            at: Instant::now(),
        }
    }

    /// Takes one request from every bucket, or says which bucket is empty, its limit and
    /// the whole seconds until it holds one request again.
    fn take(&mut self, now: Instant) -> Result<(), (&'static str, u32, u64)> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        for (i, (_, capacity, period)) in self.buckets.iter().enumerate() {
            if *capacity > 0.0 {
                self.tokens[i] = (self.tokens[i] + elapsed * capacity / period).min(*capacity);
            }
        }
        for (i, (window, capacity, period)) in self.buckets.iter().enumerate() {
            if *capacity > 0.0 && self.tokens[i] < 1.0 {
                let wait = ((1.0 - self.tokens[i]) * period / capacity).ceil().max(1.0);
                return Err((window, *capacity as u32, wait as u64));
            }
        }
        for (i, (_, capacity, _)) in self.buckets.iter().enumerate() {
            if *capacity > 0.0 {
                self.tokens[i] -= 1.0;
            }
        }
        Ok(())
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

/// Query threads yield the CPU to capture and HTTP when the machine is busy.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain syscalls on the calling thread; a failure leaves the priority as it was.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 10);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(concurrency: usize, per_project: usize, timeout_ms: u64) -> QueryLimits {
        QueryLimits {
            concurrency,
            per_project,
            timeout: Duration::from_millis(timeout_ms),
            threads: 1,
            per_minute: 0,
            per_hour: 0,
        }
    }

    #[tokio::test]
    async fn a_project_over_its_limit_is_throttled_and_its_slots_come_back() {
        let ex = Arc::new(Executor::new(limits(4, 2, 10_000), None).unwrap());
        let team = TeamId(1);
        let gate = CancellationToken::new();
        let mut waiting = Vec::new();
        for _ in 0..2 {
            let (ex, gate) = (ex.clone(), gate.clone());
            waiting.push(tokio::spawn(async move {
                let c = CancellationToken::new();
                ex.run(team, &c, async move {
                    gate.cancelled().await;
                    Ok(1)
                })
                .await
            }));
        }
        while ex.in_flight(team) < 2 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let c = CancellationToken::new();
        let third = ex.run(team, &c, async { Ok(3) }).await;
        assert!(matches!(third, Err(QueryError::Throttled(..))), "{third:?}");
        // Another project is not affected.
        assert_eq!(ex.run(TeamId(2), &c, async { Ok(5) }).await.unwrap(), 5);
        gate.cancel();
        for w in waiting {
            assert_eq!(w.await.unwrap().unwrap(), 1);
        }
        assert_eq!(ex.in_flight(team), 0);
        assert_eq!(ex.run(team, &c, async { Ok(4) }).await.unwrap(), 4);
    }

    #[tokio::test]
    async fn a_query_past_its_time_limit_stops_even_if_it_never_yields() {
        let ex = Executor::new(limits(2, 2, 200), None).unwrap();
        let c = CancellationToken::new();
        let started = Instant::now();
        // Busy for 2 s without a single await: the caller is still answered at the limit.
        let r = ex
            .run(TeamId(1), &c, async {
                let t = Instant::now();
                while t.elapsed() < Duration::from_secs(2) {
                    std::hint::spin_loop();
                }
                Ok(())
            })
            .await;
        assert!(matches!(r, Err(QueryError::Timeout(_))), "{r:?}");
        assert!(started.elapsed() < Duration::from_millis(1500));
    }

    #[tokio::test]
    async fn cancelling_stops_a_waiting_query_and_a_panic_is_an_error() {
        let ex = Arc::new(Executor::new(limits(1, 4, 10_000), None).unwrap());
        let gate = CancellationToken::new();
        let g = gate.clone();
        let ex2 = ex.clone();
        let holder = tokio::spawn(async move {
            ex2.run(TeamId(1), &CancellationToken::new(), async move {
                g.cancelled().await;
                Ok(())
            })
            .await
        });
        while ex.in_flight(TeamId(1)) < 1 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // The only slot is taken: this one waits, then is cancelled.
        let c = CancellationToken::new();
        let c2 = c.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            c2.cancel();
        });
        let r = ex.run(TeamId(2), &c, async { Ok(()) }).await;
        assert!(matches!(r, Err(QueryError::Cancelled(_))), "{r:?}");
        gate.cancel();
        holder.await.unwrap().unwrap();
        let r: Result<(), _> = ex
            .run(TeamId(1), &CancellationToken::new(), async {
                panic!("boom");
            })
            .await;
        assert!(matches!(r, Err(QueryError::Internal(_))), "{r:?}");
        assert_eq!(ex.in_flight(TeamId(1)), 0);
    }

    #[test]
    fn request_rates_refill_and_say_when() {
        let limits = QueryLimits {
            per_minute: 3,
            per_hour: 5,
            ..QueryLimits::default()
        };
        let mut r = Rate::new(&limits);
        let t0 = r.at;
        for _ in 0..3 {
            r.take(t0).unwrap();
        }
        // The minute's burst is used up: one more after 20 s (60 s / 3).
        assert_eq!(r.take(t0), Err(("minute", 3, 20)));
        r.take(t0 + Duration::from_secs(20)).unwrap();
        // Two more within the hour's 5, then the hour is the limit (720 s a request).
        r.take(t0 + Duration::from_secs(60)).unwrap();
        let e = r.take(t0 + Duration::from_secs(120)).unwrap_err();
        assert_eq!((e.0, e.1), ("hour", 5));
        assert!(e.2 > 60 && e.2 <= 720, "{e:?}");
        // 0 is no limit.
        let mut open = Rate::new(&QueryLimits {
            per_minute: 0,
            per_hour: 0,
            ..QueryLimits::default()
        });
        for _ in 0..10_000 {
            open.take(t0).unwrap();
        }
    }

    #[test]
    fn query_threads_have_the_big_stack() {
        let ex = Executor::new(limits(1, 1, 10_000), None).unwrap();
        // Recursion that needs ~64 MiB: would overflow a default 2 MiB thread.
        fn deep(n: usize) -> usize {
            let pad = std::hint::black_box([0u8; 4096]);
            if n == 0 {
                pad[0] as usize
            } else {
                deep(n - 1) + pad[1] as usize
            }
        }
        let r = ex
            .handle
            .block_on(async { ex.handle.spawn(async { deep(16 * 1024) }).await.unwrap() });
        assert_eq!(r, 0);
    }
}
