//! Fully asynchronous swapping: when a swap-in is issued.
//!
//! Swap-outs and swap-ins overlap compute freely; they share the disk's one
//! FIFO queue. Each swap-in is issued at the latest op start that still
//! hides it, given the queue:
//!
//! 1. At an op start `k` (time `now`), the estimated start of a later op `j`
//!    is `now + sum of the times of ops k..j` (no further stalls assumed).
//! 2. The maps out of memory, in need order `r_1 .. r_n` (first backward
//!    use, then tensor index), get latest start times by a backward pass over
//!    the single queue: `L_n = est(j_n)`, `S_i = L_i - io_i`,
//!    `L_i = min(est(j_i), S_{i+1})`.
//! 3. In need order, `r_i` is due now when waiting for the next op start
//!    would start it too late: `max(est(k + 1), queue free time) > S_i`
//!    (the queue free time counts the swap-ins just issued). The first map
//!    that is not due ends the scan: the ones after it have later `S`.
//! 4. Swap-ins are issued no earlier than the start of the last forward op
//!    (op `forward_ops - 1`, the earliest point of the semi-synchronous rule
//!    too): a read issued earlier would bring the map back while the forward
//!    pass, where memory peaks, is still running.
//!
//! A chosen map still in memory (not yet produced, or its swap-out not yet
//! finished or its last forward use not yet passed) is kept — never released,
//! and never written if not written yet — once even a swap-in issued at the
//! earliest later point could not hide it: `max(est(e), queue free time) >
//! est(j) - io` with `e = max(k + 1, forward_ops - 1)` (releasing it and
//! reading it back at the same op start would gain nothing).
//!
//! The estimate sees the queue as it stands: swap-outs issued later, if any,
//! are not foreseen.

use super::swap::{MapState, OpStart, Swapped};

/// Pushes onto `due` the indices (into `open`) of the maps whose swap-in is
/// due at this op start (or that are to be kept). `open` is in need order.
pub(crate) fn due(start: &OpStart<'_>, open: &[Swapped], due: &mut Vec<usize>) {
    let est = |j: usize| start.now + (start.prefix[j] - start.prefix[start.op]);
    let last = start.prefix.len() - 1;
    let next_op = est((start.op + 1).min(last));
    let earliest = est((start.op + 1)
        .max(start.forward_ops.saturating_sub(1))
        .min(last));
    let queue_now = start.queue.free_at;
    // Maps still in memory: kept when they could not be hidden any more.
    for (i, s) in open.iter().enumerate() {
        if matches!(s.state, MapState::Waiting | MapState::Writing(_))
            && earliest.max(queue_now) > est(s.map.first_backward_use) - s.io_ms
        {
            due.push(i);
        }
    }
    if start.op + 1 < start.forward_ops {
        return;
    }
    let pending: Vec<usize> = open
        .iter()
        .enumerate()
        .filter(|(_, s)| s.state == MapState::Out)
        .map(|(i, _)| i)
        .collect();
    if pending.is_empty() {
        return;
    }
    // Latest start of each pending read, backward over the queue.
    let mut latest = vec![0.0_f64; pending.len()];
    let mut next_start = f64::INFINITY;
    for (p, &i) in pending.iter().enumerate().rev() {
        let s = &open[i];
        let finish = est(s.map.first_backward_use).min(next_start);
        latest[p] = finish - s.io_ms;
        next_start = latest[p];
    }
    let mut queue_free = queue_now;
    for (p, &i) in pending.iter().enumerate() {
        if next_op.max(queue_free) <= latest[p] {
            break;
        }
        due.push(i);
        queue_free = queue_free.max(start.now) + open[i].io_ms;
    }
}
