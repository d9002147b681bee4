//! A full fence split in two: a compiler fence on the side that runs often
//! (a thread that queues an op and then looks for sleeping workers) and a
//! process-wide memory barrier on the side that runs seldom (a worker going
//! to sleep). `EngineBuilder::asymmetric_wake_fence` chooses it.
//!
//! # Why
//!
//! The sleep protocol (`engine/executor/sleep.rs`) is Dekker's: the thread
//! that queues writes the queue and then reads the sleepers' count, a
//! sleeper writes the count and then reads the queues, and a SeqCst fence
//! between the write and the read on each side keeps both from missing the
//! other. On x86 the queuing side's fence waits until every store before
//! it has reached the cache, and the stores of a push (the pushing thread's
//! ring, the op's block) go to lines that workers on other cores read: each
//! push then waits for those lines to come back, though nothing else in it
//! needs them yet. With this split, the queuing side only keeps the
//! compiler from moving the read above the write, and the sleeper pays
//! instead, once per sleep, with `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`.
//!
//! # Why it holds
//!
//! `membarrier` returns only after every thread of the process that was
//! running meanwhile has executed a full memory barrier at some point
//! between the call's start and its return (threads that were not running
//! passed through the scheduler, which orders them as a barrier does).
//! Take the queuing thread's barrier, at instant `t`, and its compiler
//! fence, which sits between its write of the queue and its read of the
//! count:
//!
//! * fence before `t` in its program order: the write of the queue is
//!   before a full barrier that completed before `membarrier` returned, so
//!   the sleeper's read of the queues, after the call, sees it;
//! * fence after `t`: the read of the count comes after a full barrier
//!   that came after the sleeper's write of the count (made and fenced
//!   before the call), so it sees the sleeper.
//!
//! Either way one side sees the other, which is all the two-fence argument
//! of `sleep.rs` uses. Under loom both sides are SeqCst fences, so the
//! models check that argument as it stands.

#[cfg(not(loom))]
use std::sync::atomic::{compiler_fence, fence, Ordering};

#[cfg(loom)]
use loom::sync::atomic::{fence, Ordering};

/// Readies the process for [`heavy`] (once; later calls return the first
/// call's outcome). `Err` says why the asymmetric fence cannot be used
/// here.
#[cfg(all(target_os = "linux", not(loom)))]
pub(crate) fn register() -> Result<(), String> {
    use std::sync::OnceLock;
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let supported = membarrier(MEMBARRIER_CMD_QUERY);
            if supported < 0 {
                return Err(format!(
                    "membarrier is not available: {}",
                    std::io::Error::last_os_error()
                ));
            }
            if supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED == 0 {
                return Err("this kernel's membarrier has no private expedited command".into());
            }
            if membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0 {
                return Err(format!(
                    "membarrier registration failed: {}",
                    std::io::Error::last_os_error()
                ));
            }
            Ok(())
        })
        .clone()
}

/// See the Linux version: no other system has the barrier.
#[cfg(all(not(target_os = "linux"), not(loom)))]
pub(crate) fn register() -> Result<(), String> {
    Err("needs Linux's membarrier system call".into())
}

/// Under loom both sides are SeqCst fences: nothing to ready.
#[cfg(loom)]
pub(crate) fn register() -> Result<(), String> {
    Ok(())
}

/// The frequent side: orders the caller's earlier writes before its later
/// reads against every [`heavy`] call.
#[inline]
pub(crate) fn light() {
    #[cfg(not(loom))]
    compiler_fence(Ordering::SeqCst);
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}

/// The seldom side: a SeqCst fence, then a memory barrier on every running
/// thread of the process. Only after [`register`] returned `Ok`.
pub(crate) fn heavy() {
    fence(Ordering::SeqCst);
    #[cfg(all(target_os = "linux", not(loom)))]
    {
        let mut rc = membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
        if rc != 0 {
            // The registration belongs to the process's address space; a
            // child made by `fork` after it starts unregistered, with the
            // answer of `register` cached: register again, once.
            let _ = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
            rc = membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
        }
        // Registered, the command cannot fail; if it did, the light side's
        // compiler fences would no longer order anything, and a wake-up
        // could be lost: stop rather than hang.
        assert!(
            rc == 0,
            "membarrier failed after registration: {}",
            std::io::Error::last_os_error()
        );
    }
}

// From <linux/membarrier.h>.
#[cfg(all(target_os = "linux", not(loom)))]
const MEMBARRIER_CMD_QUERY: libc::c_int = 0;
#[cfg(all(target_os = "linux", not(loom)))]
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
#[cfg(all(target_os = "linux", not(loom)))]
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

#[cfg(all(target_os = "linux", not(loom)))]
fn membarrier(cmd: libc::c_int) -> libc::c_int {
    // SAFETY: `membarrier(cmd, flags, cpu_id)` reads no memory of ours;
    // every command used here takes flags 0 (and no cpu).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            cmd,
            0 as libc::c_uint,
            0 as libc::c_int,
        )
    };
    rc as libc::c_int
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn registration_answers_the_same_every_time() {
        let first = register();
        assert_eq!(register(), first);
        match first {
            // Registered: the barrier returns (a failure would panic).
            Ok(()) => heavy(),
            Err(why) => assert!(!why.is_empty(), "an error says why"),
        }
        light();
    }
}
