//! One low-priority thread for background CPU work that no request waits for: topic extraction's
//! embedding of the messages and of its candidate labels, and its clustering. On Linux the thread runs under
//! `SCHED_IDLE` (or, where that is refused, at nice 10): when a turn and this work want the same
//! cores (two, on a small machine), the turn's threads take them and the work waits (under a load
//! that never lets up, topics lag). Nothing that a request may wait for (a lock, a session's gate)
//! is held while a job runs here. Jobs run one at a time, in the order given; if the thread cannot
//! start, they run on tokio's blocking pool at normal priority.
//!
//! The async side of that work (database reads and writes, hashing, lookups) runs at normal
//! priority, so it also gives way: before each of its steps it waits, a bounded time, while a turn
//! is starting ([`TurnStarting`], [`after_turns_start`]); heavier work (listing an MCP server's
//! tools) waits while a turn is running at all ([`TurnRunning`], [`after_turns`]); the heaviest (an
//! MCP server's process starting) also waits for a quiet spell ([`after_quiet`]).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use thiserror::Error;
use tokio::sync::oneshot;

/// The thread's nice value where `SCHED_IDLE` is refused (0 is normal, 19 the lowest): a nice-0
/// thread gets about ten times its share of a core it competes for.
const NICE: i32 = 10;

type Job = Box<dyn FnOnce() + Send>;

/// Jobs given and finished since the process started.
static GIVEN: AtomicU64 = AtomicU64::new(0);
static FINISHED: AtomicU64 = AtomicU64::new(0);

/// How many jobs have finished in this process (a benchmark tells from it whether background work
/// ran while it measured).
pub fn finished() -> u64 {
    FINISHED.load(Ordering::Relaxed)
}

/// Jobs given and not finished yet (the one running included).
pub fn pending() -> u64 {
    let finished = FINISHED.load(Ordering::Relaxed);
    GIVEN.load(Ordering::Relaxed).saturating_sub(finished)
}

/// A count of turns in one phase, and a wait for it to reach zero: background work waits at
/// such a gate before a step that would compete with those turns.
#[derive(Debug)]
struct Gate {
    count: AtomicUsize,
    clear: OnceLock<tokio::sync::Notify>,
}

impl Gate {
    const fn new() -> Self {
        Self {
            count: AtomicUsize::new(0),
            clear: OnceLock::new(),
        }
    }

    fn clear(&self) -> &tokio::sync::Notify {
        self.clear.get_or_init(tokio::sync::Notify::new)
    }

    /// Counts a turn in until the pass is dropped.
    fn enter(&'static self) -> Pass {
        self.count.fetch_add(1, Ordering::AcqRel);
        Pass(self)
    }

    fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Waits until no turn is in, at most `bound`; false when the bound ended the wait.
    async fn wait_clear(&self, bound: Duration) -> bool {
        let _waiting = Waiting::begin();
        tokio::time::timeout(bound, async {
            loop {
                let notified = self.clear().notified();
                tokio::pin!(notified);
                // Registered before the count is read, so a turn leaving in between still wakes us.
                notified.as_mut().enable();
                if self.count() == 0 {
                    return;
                }
                notified.await;
            }
        })
        .await
        .is_ok()
    }
}

/// A turn counted in at a [`Gate`] until dropped.
#[derive(Debug)]
struct Pass(&'static Gate);

impl Drop for Pass {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.clear().notify_waiters();
        }
    }
}

/// Turns of this process between their arrival and their first token (or their end).
static STARTING: Gate = Gate::new();

/// Turns of this process from their arrival to their end (their reply stored).
static RUNNING: Gate = Gate::new();

/// Most time [`after_turns_start`] waits: a turn gets to its first token in milliseconds, so
/// this only bounds how long topics lag under a load that never lets up.
pub const YIELD_BOUND: Duration = Duration::from_millis(250);

/// Most time [`after_turns`] waits: what waits there is never waited for by a request, and a
/// reply streams in well under this on loopback.
pub const IDLE_BOUND: Duration = Duration::from_secs(2);

/// Held by a turn from its arrival until its first token (or its end): background work waits
/// for it at its next step ([`after_turns_start`]).
#[derive(Debug)]
pub struct TurnStarting {
    began: std::time::Instant,
    _pass: Pass,
}

impl TurnStarting {
    /// Counts a turn as starting until the value is dropped.
    pub fn begin() -> Self {
        note_activity();
        Self {
            began: std::time::Instant::now(),
            _pass: STARTING.enter(),
        }
    }

    /// When the turn began starting (the metrics' added overhead is measured from here).
    pub fn began(&self) -> std::time::Instant {
        self.began
    }
}

/// Held by a turn for its whole run: work that would compete with a reply still streaming waits
/// for it ([`after_turns`]).
#[derive(Debug)]
pub struct TurnRunning {
    _pass: Pass,
}

impl TurnRunning {
    /// Counts a turn as running until the value is dropped.
    pub fn begin() -> Self {
        Self {
            _pass: RUNNING.enter(),
        }
    }
}

/// Turns starting now ([`TurnStarting`]).
pub fn turns_starting() -> usize {
    STARTING.count()
}

/// Background steps waiting at either gate now ([`after_turns_start`], [`after_turns`]).
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// How many background steps wait for turns now ([`after_turns_start`], [`after_turns`]): tests
/// wait on it to know a step is parked, instead of sleeping.
pub fn waiting_for_turns() -> usize {
    WAITING.load(Ordering::Acquire)
}

/// Counts a step as waiting until dropped.
struct Waiting;

impl Waiting {
    fn begin() -> Self {
        WAITING.fetch_add(1, Ordering::AcqRel);
        Self
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        WAITING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Waits until no turn is starting, at most [`YIELD_BOUND`]: background work calls it before
/// each of its steps that runs at normal priority, so a message sent meanwhile gets to its first
/// token without sharing the cores, the runtime or the database writer with it.
pub async fn after_turns_start() {
    if !STARTING.wait_clear(YIELD_BOUND).await {
        tracing::debug!(
            starting = turns_starting(),
            "background work goes on beside turns"
        );
    }
}

/// Waits until no turn is running, at most [`IDLE_BOUND`]: for background work heavier than a
/// step of [`after_turns_start`]'s (listing an MCP server's tools), which would
/// otherwise take a core from a reply between its first token and its end. Measured with
/// `cargo xtask bench context mcp`: 5 servers connecting at start-up made the first reply
/// 2–3.5 ms slower when they waited only for its first token, nothing measurable when they wait
/// for its end.
pub async fn after_turns() {
    RUNNING.wait_clear(IDLE_BOUND).await;
}

/// How long the instance must have been quiet (no turn arrived, not just started) before
/// [`after_quiet`] lets the heaviest background work start: a turn that arrives while an MCP
/// server's process starts shares the cores with it, and turns come in bursts (a user's next
/// message, clients reconnecting to an instance that has just started).
pub const QUIET: Duration = Duration::from_millis(250);

/// The clock of [`QUIET`]: its zero is when the instance started ([`instance_started`]) or, before
/// that, when it was first read.
fn epoch() -> std::time::Instant {
    static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();
    *EPOCH.get_or_init(std::time::Instant::now)
}

/// When a turn last arrived or the instance started, in ms on [`epoch`]'s clock.
static LAST_ARRIVAL_MS: AtomicU64 = AtomicU64::new(0);

fn note_activity() {
    let now = epoch().elapsed().as_millis() as u64;
    LAST_ARRIVAL_MS.fetch_max(now, Ordering::AcqRel);
}

/// Counts the instance's start as an arrival: an instance about to listen counts as busy for a
/// spell.
pub fn instance_started() {
    note_activity();
}

/// Waits until no turn is running and none has arrived for [`QUIET`] (the instance's start counts
/// as one), at most [`IDLE_BOUND`] in all: for an MCP server's process starting, which no turn
/// waits for but which takes the cores from a reply it coincides with. Measured with
/// `cargo xtask bench context mcp-ready`: 5 servers whose processes started the moment the
/// instance listened made the first reply about 1 ms slower; waiting for a quiet spell, nothing
/// measurable.
pub async fn after_quiet() {
    let _ = tokio::time::timeout(IDLE_BOUND, async {
        loop {
            RUNNING.wait_clear(IDLE_BOUND).await;
            let last = Duration::from_millis(LAST_ARRIVAL_MS.load(Ordering::Acquire));
            let since = epoch().elapsed().saturating_sub(last);
            if since >= QUIET {
                return;
            }
            tokio::time::sleep(QUIET - since).await;
        }
    })
    .await;
}

/// Why a background job gave no result.
#[derive(Debug, Error)]
pub enum BackgroundError {
    #[error("the background thread could not start: {0}")]
    Start(String),
    #[error("the background thread stopped")]
    Stopped,
    #[error("a background job panicked")]
    Panicked,
}

/// Runs `job` on the background thread and waits for its result (the caller's task yields meanwhile).
pub async fn run<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
) -> Result<T, BackgroundError> {
    let (tx, rx) = oneshot::channel();
    let job: Job = Box::new(move || {
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        FINISHED.fetch_add(1, Ordering::Relaxed);
        let _ = tx.send(out);
    });
    GIVEN.fetch_add(1, Ordering::Relaxed);
    match sender() {
        Ok(sender) => sender.send(job).map_err(|_| BackgroundError::Stopped)?,
        Err(e) => {
            tracing::warn!(error = %e, "background work at normal priority");
            tokio::task::spawn_blocking(job);
        }
    }
    match rx.await {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(_)) => Err(BackgroundError::Panicked),
        Err(_) => Err(BackgroundError::Stopped),
    }
}

/// The thread's queue, started on first use.
fn sender() -> Result<&'static mpsc::Sender<Job>, BackgroundError> {
    static SENDER: OnceLock<Result<mpsc::Sender<Job>, String>> = OnceLock::new();
    SENDER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("glassbox-background".into())
                .spawn(move || {
                    lower_priority();
                    for job in rx {
                        job();
                    }
                })
                .map_err(|e| e.to_string())?;
            Ok(tx)
        })
        .as_ref()
        .map_err(|e| BackgroundError::Start(e.clone()))
}

/// Lowers the calling thread's priority: `SCHED_IDLE` (it runs only on a core nothing else wants),
/// else [`NICE`]. On Linux both belong to each thread, and `0` names the calling one; elsewhere
/// they would apply to the whole process, so the thread keeps normal priority there.
#[cfg(target_os = "linux")]
fn lower_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: integers and a sched_param we own, only read during the call.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } == 0 {
        return;
    }
    let idle = std::io::Error::last_os_error();
    // SAFETY: setpriority takes plain integers and touches no memory of ours.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, NICE) } != 0 {
        tracing::info!(%idle, nice = %std::io::Error::last_os_error(), "background work keeps normal priority");
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_priority() {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests that count turns in and wait at the gates share them (statics): one at a time.
    static GATES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    #[tokio::test]
    async fn runs_jobs_in_order_off_the_runtime_and_survives_a_panic() {
        let caller = std::thread::current().id();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let jobs: Vec<_> = (0..20)
            .map(|i| {
                let seen = seen.clone();
                run(move || {
                    seen.lock().unwrap().push(i);
                    std::thread::current().id() != caller
                })
            })
            .collect();
        for off_the_caller in futures::future::join_all(jobs).await {
            assert!(off_the_caller.unwrap());
        }
        assert_eq!(*seen.lock().unwrap(), (0..20).collect::<Vec<_>>());
        let name = run(|| std::thread::current().name().map(str::to_owned)).await;
        assert_eq!(name.unwrap().as_deref(), Some("glassbox-background"));
        assert!(matches!(
            run(|| panic!("boom")).await,
            Err(BackgroundError::Panicked)
        ));
        assert_eq!(
            run(|| 2 + 2).await.unwrap(),
            4,
            "the thread goes on after a panic"
        );
    }

    /// On paused time: the clock moves only when every task waits, so "still waiting" is checked
    /// without a sleep, and a wake by the turn is told apart from the bound by the time it took.
    #[tokio::test(start_paused = true)]
    async fn background_work_waits_for_starting_and_running_turns_within_a_bound() {
        let _gates = GATES.lock().await;
        // A turn starting: the wait ends when its first token comes, not before.
        let turn = TurnStarting::begin();
        let started = tokio::time::Instant::now();
        let waiter = tokio::spawn(after_turns_start());
        while waiting_for_turns() == 0 {
            tokio::task::yield_now().await;
        }
        assert!(!waiter.is_finished(), "went on while a turn was starting");
        drop(turn);
        waiter.await.unwrap();
        assert!(
            started.elapsed() < YIELD_BOUND,
            "woken when the turn got its first token, not by the bound"
        );
        // A turn that never gets there: the wait is bounded.
        let stuck = TurnStarting::begin();
        let t = tokio::time::Instant::now();
        after_turns_start().await;
        assert!(t.elapsed() >= YIELD_BOUND);
        drop(stuck);

        // A running turn holds the other gate, for its whole run.
        let running = TurnRunning::begin();
        let started = tokio::time::Instant::now();
        let waiter = tokio::spawn(after_turns());
        while waiting_for_turns() == 0 {
            tokio::task::yield_now().await;
        }
        after_turns_start().await;
        assert!(
            started.elapsed() < YIELD_BOUND,
            "a running turn is not a starting one"
        );
        assert!(!waiter.is_finished(), "went on while a turn was running");
        drop(running);
        waiter.await.unwrap();
        assert!(started.elapsed() < IDLE_BOUND, "woken when the turn ended");
        let _stuck = TurnRunning::begin();
        let t = tokio::time::Instant::now();
        after_turns().await;
        assert!(t.elapsed() >= IDLE_BOUND);
    }

    /// On the real clock (the quiet spell is measured on it).
    #[tokio::test]
    async fn the_heaviest_work_waits_for_a_quiet_spell_after_a_turn_arrives() {
        let _gates = GATES.lock().await;
        note_activity();
        let t = std::time::Instant::now();
        after_quiet().await;
        let waited = t.elapsed();
        // The arrival is kept in whole milliseconds.
        assert!(waited + Duration::from_millis(1) >= QUIET, "{waited:?}");
        assert!(waited < IDLE_BOUND + Duration::from_millis(500), "bounded");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_thread_runs_below_the_process() {
        // SAFETY: sched_getscheduler and getpriority take integers.
        let (policy, nice) = run(|| unsafe {
            (
                libc::sched_getscheduler(0),
                libc::getpriority(libc::PRIO_PROCESS, 0),
            )
        })
        .await
        .unwrap();
        let ours = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        assert!(
            policy == libc::SCHED_IDLE || nice >= (ours + NICE).min(19),
            "policy {policy}, nice {nice}"
        );
        assert_ne!(
            unsafe { libc::sched_getscheduler(0) },
            libc::SCHED_IDLE,
            "only that thread"
        );
    }
}
