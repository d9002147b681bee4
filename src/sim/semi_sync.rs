//! Semi-synchronous swapping: when a swap-in is issued.
//!
//! In the forward pass a swap-out overlaps the op after the one that
//! produced the map and that op ends only when both have ended (the core
//! loop of the simulator applies that). In the backward pass a map that op
//! `j` reads is swapped in when op `j - 1` starts, and op `j` waits for it.

use super::swap::{MapState, OpStart, Swapped};

/// Pushes onto `due` the indices (into `open`) of the maps whose swap-in is
/// due at this op start: those first read in the backward pass by this op or
/// the next one. `open` is in need order.
pub(crate) fn due(start: &OpStart<'_>, open: &[Swapped], due: &mut Vec<usize>) {
    for (i, s) in open.iter().enumerate() {
        if s.map.first_backward_use > start.op + 1 {
            break;
        }
        if !matches!(s.state, MapState::Reading(_) | MapState::Back) {
            due.push(i);
        }
    }
}
