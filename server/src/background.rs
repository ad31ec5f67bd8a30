//! One low-priority thread for the server's background CPU work: topic extraction's clustering and
//! the vectors it computes ahead. On Linux the thread runs under `SCHED_IDLE` (or, where that is
//! refused, at nice 10): when a turn and background work want the same cores (two, on a small
//! machine), the turn's threads take them, and a message sent while topics are extracted is not
//! slowed by it; the background work waits instead (under a load that never lets up, topics lag).
//! Jobs run one at a time, in the order given.

use std::sync::OnceLock;
use std::sync::mpsc;

use thiserror::Error;
use tokio::sync::oneshot;

/// The thread's nice value where `SCHED_IDLE` is refused (0 is normal, 19 the lowest): a nice-0
/// thread gets about ten times its share of a core it competes for.
const NICE: i32 = 10;

type Job = Box<dyn FnOnce() + Send>;

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
        let _ = tx.send(out);
    });
    sender()?.send(job).map_err(|_| BackgroundError::Stopped)?;
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

    #[tokio::test]
    async fn runs_jobs_in_order_off_the_runtime_and_survives_a_panic() {
        let caller = std::thread::current().id();
        let (a, b) = tokio::join!(
            run(move || std::thread::current().id() != caller),
            run(|| std::thread::current().name().map(str::to_owned))
        );
        assert!(a.unwrap());
        assert_eq!(b.unwrap().as_deref(), Some("glassbox-background"));
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

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_thread_runs_only_when_a_core_is_free() {
        // SAFETY: sched_getscheduler takes an integer.
        let policy = run(|| unsafe { libc::sched_getscheduler(0) })
            .await
            .unwrap();
        assert_eq!(policy, libc::SCHED_IDLE);
        assert_ne!(
            unsafe { libc::sched_getscheduler(0) },
            libc::SCHED_IDLE,
            "only that thread"
        );
    }
}
