//! Helper threads for one caller at a time: the caller runs its share of a step on its own thread while
//! each helper runs one job, and the hand-off costs no system call when it is quick. Between jobs a
//! helper spins for a short while before it parks, and the caller spins before it parks while it waits.
//!
//! Why not a general pool: a tensor-parallel encoder hands work over twice per layer, often for less
//! than a tenth of a millisecond; a pool whose idle workers yield and sleep loses a good part of that
//! to waking them up (measured with rayon: 1.4× from two threads on single sentences, against 1.8×
//! with spinning hand-offs).

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle, Thread};

/// Spin iterations before a waiting thread parks: about 50 µs, longer than a step's hand-off takes
/// when both threads run, short enough to give the core up soon when more threads than cores are busy.
const SPINS: u32 = 1 << 11;

const IDLE: u8 = 0;
const POSTED: u8 = 1;
const DONE: u8 = 2;

type Job = Box<dyn FnOnce() + Send>;

/// What a helper and the caller that posted its job share.
struct Slot {
    state: AtomicU8,
    job: Mutex<Option<(Job, Thread)>>,
    stop: AtomicBool,
}

struct Helper {
    slot: Arc<Slot>,
    thread: Option<JoinHandle<()>>,
}

/// A set of helper threads, used by one caller at a time (`&mut self`).
pub struct Crew {
    helpers: Vec<Helper>,
}

impl Crew {
    /// Starts `helpers` threads named `{name}-{i}`.
    pub fn new(helpers: usize, name: &str) -> std::io::Result<Self> {
        let helpers = (0..helpers)
            .map(|i| {
                let slot = Arc::new(Slot {
                    state: AtomicU8::new(IDLE),
                    job: Mutex::new(None),
                    stop: AtomicBool::new(false),
                });
                let theirs = slot.clone();
                let thread = thread::Builder::new()
                    .name(format!("{name}-{i}"))
                    .spawn(move || serve(&theirs))?;
                Ok(Helper {
                    slot,
                    thread: Some(thread),
                })
            })
            .collect::<std::io::Result<_>>()?;
        Ok(Self { helpers })
    }

    /// Threads a step can use: the helpers and the caller.
    pub fn threads(&self) -> usize {
        self.helpers.len() + 1
    }

    /// Runs `mine` on the calling thread while helper `i` runs `theirs[i]` (jobs beyond the helpers
    /// run on the calling thread after `mine`). Returns every result in order, `mine` first; `None`
    /// for a job that panicked.
    pub fn run<T: Send + 'static>(
        &mut self,
        mine: impl FnOnce() -> T,
        theirs: Vec<Box<dyn FnOnce() -> T + Send>>,
    ) -> Vec<Option<T>> {
        let mut posted = Vec::with_capacity(theirs.len());
        let mut extra = Vec::new();
        for (i, job) in theirs.into_iter().enumerate() {
            match self.helpers.get(i) {
                Some(helper) => {
                    let output = Arc::new(Mutex::new(None));
                    let sink = output.clone();
                    let job: Job = Box::new(move || *lock(&sink) = Some(job()));
                    *lock(&helper.slot.job) = Some((job, thread::current()));
                    helper.slot.state.store(POSTED, Ordering::SeqCst);
                    if let Some(thread) = &helper.thread {
                        thread.thread().unpark();
                    }
                    posted.push((helper, output));
                }
                None => extra.push(job),
            }
        }
        let mut results = vec![Some(mine())];
        let extra: Vec<T> = extra.into_iter().map(|job| job()).collect();
        for (helper, output) in posted {
            wait_for(|| helper.slot.state.load(Ordering::SeqCst) == DONE);
            helper.slot.state.store(IDLE, Ordering::SeqCst);
            results.push(lock(&output).take());
        }
        results.extend(extra.into_iter().map(Some));
        results
    }
}

impl Drop for Crew {
    fn drop(&mut self) {
        for helper in &mut self.helpers {
            helper.slot.stop.store(true, Ordering::SeqCst);
            if let Some(thread) = helper.thread.take() {
                thread.thread().unpark();
                let _ = thread.join();
            }
        }
    }
}

/// A helper's life: wait for a job, run it, say so, until told to stop.
fn serve(slot: &Slot) {
    loop {
        wait_for(|| {
            slot.state.load(Ordering::SeqCst) == POSTED || slot.stop.load(Ordering::SeqCst)
        });
        if slot.stop.load(Ordering::SeqCst) {
            return;
        }
        if let Some((job, owner)) = lock(&slot.job).take() {
            // A panicking job must still report, or its owner would wait forever.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            slot.state.store(DONE, Ordering::SeqCst);
            owner.unpark();
        }
    }
}

/// Spins, then parks, until `ready()`. Whoever makes it true unparks this thread afterwards, and an
/// unpark that comes before the park makes the park return at once, so no wake-up is lost.
fn wait_for(ready: impl Fn() -> bool) {
    let mut spins = 0;
    while !ready() {
        if spins < SPINS {
            std::hint::spin_loop();
            spins += 1;
        } else {
            thread::park();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    type Task = Box<dyn FnOnce() -> usize + Send>;

    #[test]
    fn results_come_back_in_order_including_jobs_beyond_the_helpers() {
        let mut crew = Crew::new(2, "crew-test").expect("threads");
        assert_eq!(crew.threads(), 3);
        for round in 0..50 {
            let theirs: Vec<Task> = (1..5)
                .map(|i| Box::new(move || i * 10 + round) as Task)
                .collect();
            let got = crew.run(|| round, theirs);
            let want: Vec<Option<usize>> = (0..5).map(|i| Some(i * 10 + round)).collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn a_panicking_job_is_reported_and_the_crew_keeps_working() {
        let mut crew = Crew::new(1, "crew-test").expect("threads");
        let boom: Vec<Task> = vec![Box::new(|| panic!("job failed on purpose"))];
        assert_eq!(crew.run(|| 1, boom), vec![Some(1), None]);
        let fine: Vec<Task> = vec![Box::new(|| 2)];
        assert_eq!(crew.run(|| 1, fine), vec![Some(1), Some(2)]);
    }

    #[test]
    fn helpers_that_parked_wake_up_for_the_next_job() {
        let mut crew = Crew::new(1, "crew-test").expect("threads");
        // Long enough for the helper to stop spinning and park.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let job: Vec<Task> = vec![Box::new(|| 7)];
        assert_eq!(crew.run(|| 0, job), vec![Some(0), Some(7)]);
    }
}
