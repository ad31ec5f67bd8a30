//! The memory allocator the server's binaries use, and how the process asks the kernel for memory.

/// The allocator for `#[global_allocator]`: mimalloc, which spends less time per request than
/// glibc's on the server's many small, short-lived allocations across threads
/// (`cargo xtask bench gateway`).
pub use mimalloc::MiMalloc as Allocator;

/// Why the kernel refused to change how this process gets memory.
#[derive(Debug, thiserror::Error)]
#[error("could not turn off transparent huge pages: {0}")]
pub struct TuneError(#[from] std::io::Error);

/// Turns off transparent huge pages for this process; binaries call it first thing in `main`.
///
/// mimalloc asks for huge pages on its arenas (`madvise`), and every 2 MB region it gives back
/// and touches again is then a fresh huge page the kernel zeroes whole. Under load that zeroing
/// took a fifth of all CPU and cut throughput by a fifth (`cargo xtask bench gateway`, c=16,
/// whenever the machine had enough free memory for huge pages); with 4 kB pages a touch zeroes
/// only what is used. The kernel checks the flag at each page fault, so memory mapped before
/// the call is covered too.
pub fn disable_transparent_huge_pages() -> Result<(), TuneError> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with PR_SET_THP_DISABLE takes integers and touches no memory of ours.
        if unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[cfg(target_os = "linux")]
    #[test]
    fn the_process_reports_huge_pages_off_after_the_call() {
        super::disable_transparent_huge_pages().unwrap();
        // SAFETY: prctl with PR_GET_THP_DISABLE takes integers and touches no memory of ours.
        assert_eq!(
            unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) },
            1
        );
    }
}
