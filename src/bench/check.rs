//! The order check of the drivers that run a [`Trace`] outside the engine
//! (`PEER_CHECK=1` in the rayon driver and the lean control under
//! `peers/`; the C drivers keep the same check in `peers/common.h`).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::{Trace, TraceOp};

/// Checks that a run of a trace kept the order the engine's rules ask
/// for: when an op starts, each var it uses has seen exactly the writes
/// pushed before it, and each var it writes also every read pushed before
/// it. Reads of one var between two writes may run in any order.
///
/// Call [`OrderCheck::start`] when an op's body starts and
/// [`OrderCheck::end`] when it ends, from any thread; a start that finds
/// a var's counts other than expected counts one violation per var.
///
/// # Examples
///
/// ```
/// use depengine::bench::{OrderCheck, Trace};
/// let mut trace = Trace::new(1);
/// trace.push(&[], &[0], 0, 0); // op 0 writes var 0
/// trace.push(&[0], &[], 0, 0); // op 1 reads it
/// let check = OrderCheck::of(&trace);
/// // Op 1 before op 0: the read did not see the write.
/// check.start(&trace, &trace.ops[1]);
/// assert_eq!(check.violations(), 1);
/// ```
pub struct OrderCheck {
    /// Per var slot of each op (indexed as `Trace::var_ids`): the writes,
    /// and the reads, of that var pushed before the op.
    expect_writes: Vec<u32>,
    expect_reads: Vec<u32>,
    /// Per var: the writes and reads completed so far in this run.
    done_writes: Vec<AtomicU32>,
    done_reads: Vec<AtomicU32>,
    violations: AtomicU64,
}

/// An op's var slots in `Trace::var_ids` (its reads, then its writes),
/// each with whether it is a write.
fn slots(op: &TraceOp) -> impl Iterator<Item = (usize, bool)> {
    let start = op.reads_start as usize;
    let first_write = start + op.n_reads as usize;
    (start..first_write + op.n_writes as usize).map(move |o| (o, o >= first_write))
}

impl OrderCheck {
    /// The expectations of every op of `trace`, with no op run yet.
    pub fn of(trace: &Trace) -> OrderCheck {
        let mut writes = vec![0u32; trace.vars];
        let mut reads = vec![0u32; trace.vars];
        let mut expect_writes = vec![0u32; trace.var_ids.len()];
        let mut expect_reads = vec![0u32; trace.var_ids.len()];
        for op in &trace.ops {
            // Every slot's expectation before the op's own accesses count.
            for (o, _) in slots(op) {
                let v = trace.var_ids[o] as usize;
                expect_writes[o] = writes[v];
                expect_reads[o] = reads[v];
            }
            for (o, is_write) in slots(op) {
                let v = trace.var_ids[o] as usize;
                if is_write {
                    writes[v] += 1;
                } else {
                    reads[v] += 1;
                }
            }
        }
        OrderCheck {
            expect_writes,
            expect_reads,
            done_writes: (0..trace.vars).map(|_| AtomicU32::new(0)).collect(),
            done_reads: (0..trace.vars).map(|_| AtomicU32::new(0)).collect(),
            violations: AtomicU64::new(0),
        }
    }

    /// Forgets the ops run so far, for the next run of the same trace
    /// (the violations counted stay).
    pub fn reset(&self) {
        for c in self.done_writes.iter().chain(&self.done_reads) {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// `op` (of the trace this check was made of) starts.
    pub fn start(&self, trace: &Trace, op: &TraceOp) {
        for (o, is_write) in slots(op) {
            let v = trace.var_ids[o] as usize;
            let mut ok = self.done_writes[v].load(Ordering::Acquire) == self.expect_writes[o];
            if is_write {
                ok &= self.done_reads[v].load(Ordering::Acquire) == self.expect_reads[o];
            }
            if !ok {
                self.violations.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// `op` ends.
    pub fn end(&self, trace: &Trace, op: &TraceOp) {
        for (o, is_write) in slots(op) {
            let v = trace.var_ids[o] as usize;
            let done = if is_write {
                &self.done_writes[v]
            } else {
                &self.done_reads[v]
            };
            done.fetch_add(1, Ordering::Release);
        }
    }

    /// Violations counted so far, all runs together.
    pub fn violations(&self) -> u64 {
        self.violations.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{Spec, Workload};

    fn run_in(check: &OrderCheck, trace: &Trace, order: &[usize]) {
        for &i in order {
            check.start(trace, &trace.ops[i]);
            check.end(trace, &trace.ops[i]);
        }
    }

    #[test]
    fn push_order_keeps_every_workload_clean() {
        for w in [
            Workload::Chain,
            Workload::Wavefront,
            Workload::Fan,
            Workload::Random,
            Workload::Randsum,
            Workload::Rwmix,
        ] {
            let trace = Spec {
                n: 20,
                ..Spec::new(w, 300)
            }
            .trace();
            let check = OrderCheck::of(&trace);
            let order: Vec<usize> = (0..trace.ops.len()).collect();
            run_in(&check, &trace, &order);
            check.reset();
            run_in(&check, &trace, &order);
            assert_eq!(check.violations(), 0, "{w}");
        }
    }

    #[test]
    fn reads_between_two_writes_may_swap_but_not_pass_a_write() {
        let mut trace = Trace::new(1);
        trace.push(&[], &[0], 0, 0); // 0: write
        trace.push(&[0], &[], 0, 0); // 1: read
        trace.push(&[0], &[], 0, 0); // 2: read
        trace.push(&[], &[0], 0, 0); // 3: write
        let check = OrderCheck::of(&trace);
        run_in(&check, &trace, &[0, 2, 1, 3]);
        assert_eq!(check.violations(), 0);

        // The second write before the second read: one violation at the
        // write (a read not seen), one at the read (a write seen early).
        check.reset();
        run_in(&check, &trace, &[0, 1, 3, 2]);
        assert_eq!(check.violations(), 2);
    }

    #[test]
    fn overlapping_ops_are_caught() {
        let mut trace = Trace::new(1);
        trace.push(&[], &[0], 0, 0);
        trace.push(&[], &[0], 0, 0);
        let check = OrderCheck::of(&trace);
        // Op 1 starts while op 0 still runs.
        check.start(&trace, &trace.ops[0]);
        check.start(&trace, &trace.ops[1]);
        assert_eq!(check.violations(), 1);
    }
}
