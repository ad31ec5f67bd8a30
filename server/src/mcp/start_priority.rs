//! A stdio MCP server's process starts at the lowest CPU priority and gets the server's own once it
//! is connected (or after [`LOW_START_BOUND`]), so a reply that streams while the process starts
//! keeps the cores (docs/agents.md, "MCP servers"). The process inherits the priority of the thread
//! that spawns it: [`spawn_low`] spawns from a thread of its own that runs at that priority, and
//! [`raise`] gives the process's threads, and its descendants', the server's priority again. The
//! thread lives as long as the process: a child that asked for a signal when its parent ends
//! (`PR_SET_PDEATHSIG`) gets it when the thread that spawned it ends.
//!
//! Raising a priority needs `CAP_SYS_NICE` or a high enough `RLIMIT_NICE` (root has the first,
//! most containers neither): where this process could not raise it again, the process starts at
//! normal priority instead, competing with replies while it starts, rather than staying low.
//! Outside Linux (where a priority belongs to the whole process, not to a thread) the same.

use std::io;
use std::sync::{OnceLock, mpsc};

/// The nice value a starting server runs at (19 is the lowest priority: a thread at nice 0 gets
/// about 70 times its share of a core they both want).
const START_NICE: i32 = 19;

/// Longest a started server stays at [`START_NICE`] while it is not connected yet: under a load
/// that never lets up it would otherwise hardly start.
pub const LOW_START_BOUND: std::time::Duration = std::time::Duration::from_secs(2);

/// Most processes [`raise`] walks (the server and its descendants).
const MAX_PROCESSES: usize = 64;

type Job = Box<dyn FnOnce() + Send>;

/// Runs `spawn` (which spawns a child process) on the spawning thread at [`START_NICE`] when this
/// process can raise the child again afterwards; otherwise here, at the caller's priority. The
/// tokio runtime is entered there, so tokio's process types work.
pub async fn spawn_low<T: Send + 'static>(
    spawn: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let Some(spawner) = spawner() else {
        return spawn();
    };
    let handle = tokio::runtime::Handle::current();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _runtime = handle.enter();
        let _ = tx.send(spawn());
    });
    spawner
        .send(job)
        .map_err(|_| io::Error::other("the spawning thread has stopped"))?;
    rx.await
        .map_err(|_| io::Error::other("the spawning thread ended without an answer"))?
}

/// The spawning thread's queue, started on first use at [`START_NICE`]; `None` when this process
/// could not raise a child again ([`normal_nice`]) or the thread could not start.
fn spawner() -> Option<&'static mpsc::Sender<Job>> {
    static SPAWNER: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            normal_nice()?;
            let (tx, rx) = mpsc::channel::<Job>();
            let started = std::thread::Builder::new()
                .name("glassbox-mcp-spawn".into())
                .spawn(move || {
                    if !os::set_nice(0, START_NICE) {
                        tracing::warn!("MCP servers start at normal priority: lowering it was refused");
                    }
                    for job in rx {
                        job();
                    }
                });
            match started {
                Ok(_) => Some(tx),
                Err(e) => {
                    tracing::warn!(error = %e, "MCP servers start at normal priority: no thread to start them");
                    None
                }
            }
        })
        .as_ref()
}

/// Gives every thread of process `pid` and of its descendants (as `/proc` lists each thread's
/// children) that is still at [`START_NICE`] this process's own priority; threads a server set to
/// another priority itself keep theirs. What cannot be raised is logged.
pub fn raise(pid: u32) {
    let Some(normal) = normal_nice() else { return };
    let mut stack = vec![pid];
    let mut walked = 0;
    while let Some(process) = stack.pop() {
        walked += 1;
        if walked > MAX_PROCESSES {
            tracing::warn!(
                pid,
                "an MCP server's processes past the first {MAX_PROCESSES} keep their low priority"
            );
            break;
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{process}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Some(tid) = task
                .file_name()
                .to_str()
                .and_then(|t| t.parse::<u32>().ok())
            else {
                continue;
            };
            if os::nice(tid) == Some(START_NICE) && !os::set_nice(tid, normal) {
                tracing::warn!(
                    pid,
                    tid,
                    "an MCP server's thread keeps its low priority: raising it was refused"
                );
            }
            match std::fs::read_to_string(task.path().join("children")) {
                Ok(children) => stack.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                ),
                // The thread ended meanwhile (its children, if any, are another's now).
                Err(_) if !task.path().exists() => {}
                Err(e) => {
                    tracing::warn!(pid, tid, error = %e, "an MCP server's child processes cannot be listed: they may keep a low priority");
                }
            }
        }
    }
}

/// This process's own nice value when it can lower a thread to [`START_NICE`] and raise it back
/// (found once, on a thread of its own); `None` otherwise.
fn normal_nice() -> Option<i32> {
    static PROBE: OnceLock<Option<i32>> = OnceLock::new();
    *PROBE.get_or_init(|| {
        std::thread::Builder::new()
            .name("glassbox-nice-probe".into())
            .spawn(|| {
                let normal = os::nice(0)?;
                (normal < START_NICE && os::set_nice(0, START_NICE) && os::set_nice(0, normal))
                    .then_some(normal)
            })
            .ok()?
            .join()
            .ok()
            .flatten()
    })
}

#[cfg(target_os = "linux")]
mod os {
    /// The nice value of thread `tid` (0: the calling thread).
    pub fn nice(tid: u32) -> Option<i32> {
        // SAFETY: errno is this thread's; getpriority takes integers. It may answer -1 as a
        // value, so errno, cleared before, tells a failure apart.
        unsafe {
            *libc::__errno_location() = 0;
            let nice = libc::getpriority(libc::PRIO_PROCESS, tid);
            (nice != -1 || *libc::__errno_location() == 0).then_some(nice)
        }
    }

    /// Sets thread `tid`'s nice value (0: the calling thread); false when refused.
    pub fn set_nice(tid: u32, nice: i32) -> bool {
        // SAFETY: setpriority takes integers and touches no memory of ours.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) == 0 }
    }
}

#[cfg(not(target_os = "linux"))]
mod os {
    pub fn nice(_tid: u32) -> Option<i32> {
        None
    }

    pub fn set_nice(_tid: u32, _nice: i32) -> bool {
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Runs its closure when dropped (the test's `sleep` ends even when an assertion fails).
    struct OnDrop<F: FnMut()>(F);

    impl<F: FnMut()> Drop for OnDrop<F> {
        fn drop(&mut self) {
            (self.0)();
        }
    }

    /// Nice values of `pid`'s threads.
    fn nices(pid: u32) -> Vec<i32> {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
            .filter_map(|t| t.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(os::nice)
            .collect()
    }

    /// The first child process of `pid`, waiting for it to appear; `None` where the kernel does
    /// not list a thread's children.
    async fn child_of(pid: u32) -> Option<u32> {
        for _ in 0..500 {
            let children =
                std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
            if let Some(c) = children.split_whitespace().next() {
                return Some(c.parse().unwrap());
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("{pid} started no child");
    }

    #[tokio::test]
    async fn a_server_starts_lowest_and_its_whole_tree_gets_our_priority_back() {
        let ours = os::nice(0).unwrap();
        let mut cmd = tokio::process::Command::new("sh");
        // A shell that starts a child of its own (as `npx` starts node) and waits.
        cmd.args(["-c", "sleep 10 & wait"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        let child = spawn_low(move || cmd.spawn()).await.unwrap();
        let pid = child.id().unwrap();
        let Some(grandchild) = child_of(pid).await else {
            eprintln!("skipped: this kernel does not list a thread's children");
            return;
        };
        // SAFETY: kill takes integers; the grandchild is the shell's `sleep`, ours to end.
        let _end = OnDrop(move || unsafe {
            libc::kill(grandchild as i32, libc::SIGKILL);
        });
        match normal_nice() {
            Some(normal) => {
                assert_eq!(normal, ours);
                assert_eq!(nices(pid), vec![START_NICE]);
                assert_eq!(nices(grandchild), vec![START_NICE], "inherited");
                raise(pid);
                assert_eq!(nices(pid), vec![ours]);
                assert_eq!(nices(grandchild), vec![ours]);
            }
            // This process cannot raise a priority again: the server starts at ours.
            None => assert_eq!(nices(pid), vec![ours]),
        }
        assert_eq!(
            os::nice(0),
            Some(ours),
            "the caller's priority is untouched"
        );
    }
}
