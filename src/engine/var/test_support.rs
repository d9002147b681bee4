//! Helpers for the var protocol's unit tests (`fast_read.rs`,
//! `fast_write.rs`): bare vars and op blocks driven by hand, without an
//! engine.

use std::ptr::NonNull;

use super::{FailedVars, VarId, VarInner, WriteExit};
use crate::engine::op::{OpBlock, OpPtr};
use crate::engine::ready::ReadyList;
use crate::sync::{Arc, Ordering};

pub(super) fn var() -> Arc<VarInner> {
    VarInner::new(VarId { engine: 1, id: 0 }, None, None)
}

/// Blocks waiting for one grant each (the var's; no push guard here).
pub(super) fn blocks(n: usize) -> Vec<OpBlock> {
    (0..n)
        .map(|_| {
            let b = OpBlock::empty();
            b.wait.store(1, Ordering::Relaxed);
            b
        })
        .collect()
}

pub(super) fn ptr(b: &OpBlock) -> OpPtr {
    OpPtr(NonNull::from(b))
}

/// Completes `op`'s write of `v`, `op` naming `v` alone.
pub(super) fn complete_write(v: &VarInner, op: &OpBlock, ready: &mut ReadyList) -> bool {
    complete_write_of(v, op, true, ready)
}

pub(super) fn complete_write_of(
    v: &VarInner,
    op: &OpBlock,
    one_var: bool,
    ready: &mut ReadyList,
) -> bool {
    let exit = WriteExit {
        op: ptr(op),
        one_var,
        run_next: None,
    };
    v.complete_write(exit, None, &FailedVars::new(), true, ready)
}

/// Drops the last handle of each var: each must free its self-reference
/// at once, nothing being pending on it.
pub(super) fn orphan_all_and_check_freed(vars: &[&Arc<VarInner>]) {
    for v in vars {
        v.orphan();
        assert_eq!(Arc::strong_count(v), 1, "{} kept its self-reference", v.id);
    }
}

/// Drops the self-reference a completion handed over, as `complete`
/// does, and checks that the var is then free of the engine.
///
/// # Safety
///
/// A completion on `v` returned true, and nothing dropped its count yet.
pub(super) unsafe fn drop_handed_self_ref(v: &Arc<VarInner>) {
    // SAFETY: per the contract, that count is ours to drop.
    unsafe { Arc::decrement_strong_count(Arc::as_ptr(v)) };
    assert_eq!(Arc::strong_count(v), 1);
}

pub(super) fn ready_ops(mut ready: ReadyList) -> Vec<OpPtr> {
    std::iter::from_fn(|| ready.pop()).collect()
}

/// Runs `f` while another thread holds `v`'s lock, which that thread
/// lets go only once `f` has returned: whatever `f` does must take no
/// lock of `v`, or the test hangs there.
pub(super) fn while_another_thread_holds_the_lock(v: &VarInner, f: impl FnOnce()) {
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        s.spawn(move || {
            let _guard = v.hot.state.lock();
            locked_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        });
        locked_rx.recv().unwrap();
        f();
        release_tx.send(()).unwrap();
    });
}
