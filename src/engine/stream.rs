//! Ops taken from an iterator a few ahead of their push, so that the
//! lines their push will touch are asked for while the ops before them
//! are pushed ([`Engine::push_all`](super::Engine::push_all),
//! [`Serial::push_all`](super::Serial::push_all)).

use std::collections::VecDeque;

/// Items taken from the iterator whose turn has not come yet, at most
/// (the next one's included). Each lets one more miss overlap the turns
/// before it: a serial scope's op takes about 20-30 ns and a miss 80-100
/// ns, so four would do there, and a push to the workers takes longer;
/// eight leaves room for slower misses.
pub(crate) const LOOKAHEAD: usize = 8;

/// Calls `each` on the items `items` yields, in order, until it fails.
/// Each item is taken from the iterator and shown to `ask` (which asks
/// for the lines its turn will need) up to [`LOOKAHEAD`] − 1 turns
/// before its own.
///
/// On an error the items already taken after the failing one are dropped
/// without their turn.
#[inline]
pub(crate) fn each_ahead<T, E>(
    items: impl IntoIterator<Item = T>,
    mut ask: impl FnMut(&T),
    mut each: impl FnMut(T) -> Result<(), E>,
) -> Result<(), E> {
    // Fused: it is asked for more after it ends.
    let mut items = items.into_iter().fuse();
    let mut ahead: VecDeque<T> = VecDeque::with_capacity(LOOKAHEAD);
    loop {
        while ahead.len() < LOOKAHEAD {
            let Some(item) = items.next() else {
                break;
            };
            ask(&item);
            ahead.push_back(item);
        }
        let Some(item) = ahead.pop_front() else {
            return Ok(());
        };
        each(item)?;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_item_has_its_turn_in_order_after_being_asked_for_at_most_lookahead_turns_early() {
        use std::cell::RefCell;
        let done = RefCell::new(Vec::new());
        let mut asked = Vec::new();
        let r: Result<(), ()> = each_ahead(
            0..100usize,
            |&i| {
                // Asked for before its turn, and no more than
                // LOOKAHEAD - 1 turns before it.
                let turns = done.borrow().len();
                assert!(
                    turns <= i && i < turns + LOOKAHEAD,
                    "{i} after {turns} turns"
                );
                asked.push(i);
            },
            |i| {
                done.borrow_mut().push(i);
                Ok(())
            },
        );
        assert_eq!(r, Ok(()));
        assert_eq!(*done.borrow(), (0..100).collect::<Vec<_>>());
        assert_eq!(asked, *done.borrow());
    }

    #[test]
    fn an_item_is_taken_no_more_than_lookahead_before_its_turn() {
        use std::cell::Cell;
        let taken = Cell::new(0usize);
        let r: Result<(), ()> = each_ahead(
            (0..50usize).inspect(|_| taken.set(taken.get() + 1)),
            |_| {},
            |i| {
                // Item i's turn: items 0..=i are taken, and at most
                // LOOKAHEAD - 1 beyond it.
                assert!(taken.get() > i);
                assert!(
                    taken.get() <= (i + LOOKAHEAD).min(50),
                    "{i}: {}",
                    taken.get()
                );
                Ok(())
            },
        );
        assert_eq!(r, Ok(()));
    }

    #[test]
    fn the_first_error_stops_the_turns() {
        let mut done = Vec::new();
        let r = each_ahead(
            0..100usize,
            |_| {},
            |i| {
                if i == 30 {
                    return Err(i);
                }
                done.push(i);
                Ok(())
            },
        );
        assert_eq!(r, Err(30));
        assert_eq!(done, (0..30).collect::<Vec<_>>());
    }
}
