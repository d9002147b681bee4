//! A bounded FIFO with one producer and many consumers: the ready ops of
//! one pushing thread, which the workers of a pool take
//! (`pusher_queues.rs`).
//!
//! # Why not crossbeam's deque
//!
//! The pushing thread used to own a crossbeam `Worker` deque. Its push
//! reads the stealers' index on every call (to see whether the buffer must
//! grow), and that index shares a cache line with the owner's own index.
//! Each batch a worker steals writes that line, so the next push waits for
//! it to come back from the stealer's core: on a 16-core machine the
//! deque lost to crossbeam's `Injector` from 4 workers on (`BENCHMARKS-HISTORY.md`,
//! "Pusher queues at 4–16 workers"), where every push is two locked
//! instructions on lines the searching workers read.
//!
//! Here the producer's index and the consumers' index live on lines of
//! their own, the producer writes only its own index and the slots, with
//! plain stores, and it reads the consumers' index only when the ring
//! looks full from its last reading. A push is then two stores and no
//! load of a line another core writes; the lines still move to the
//! consumers, but the producer does not wait for them.
//!
//! # Protocol
//!
//! Indices count pushes and never wrap (a `usize` of pushes).
//!
//! * Producer: when `tail - head_seen` is the capacity, it reads `head`
//!   (Acquire) into `head_seen`; still full, it hands the item back (the
//!   caller queues it elsewhere). Otherwise it stores the item in slot
//!   `tail % capacity` (Relaxed) and publishes `tail + 1` (Release).
//! * Consumer: reads `head`, then `tail` (both Acquire; `tail >= head`
//!   since `head` never passes a `tail` some consumer read), copies up to
//!   half of the items between them (at most [`MAX_BATCH`]), then moves
//!   `head` past them with a compare-and-swap (Release on success). A
//!   failed swap means another consumer took them: it retries.
//! * Why a copied item is the right one: the producer overwrites the slot
//!   of index `i` (for index `i + capacity`) only after reading a `head`
//!   above `i`. A consumer whose swap from `h` succeeded saw `head` equal to
//!   `h` after it copied items `h..h + n`, and `head` only grows, so no
//!   `head` above them had been published, and none was overwritten. Its
//!   copies happen before its swap (Release), and the producer's reading
//!   of that `head` (Acquire) before the overwrite.
//!
//! Slots are atomics, so a consumer that copies a slot the producer is
//! overwriting reads one value or the other, and its swap fails.

// Under loom the pools keep to the injector (`pusher_queues.rs`): the
// ring is there only for its own model.
#![cfg_attr(loom, allow(dead_code))]

use std::ptr::{self, NonNull};

use super::super::op::{OpBlock, OpPtr};
use crate::sync::deque::{Steal, Worker};
use crate::sync::{Arc, AtomicPtr, AtomicUsize, CachePadded, Ordering};

/// Items a consumer takes at most in one swap.
pub(crate) const MAX_BATCH: usize = 32;

struct Shared {
    /// The next index a consumer takes.
    head: CachePadded<AtomicUsize>,
    /// One past the last index the producer published.
    tail: CachePadded<AtomicUsize>,
    slots: Box<[AtomicPtr<OpBlock>]>,
}

impl Shared {
    fn slot(&self, index: usize) -> &AtomicPtr<OpBlock> {
        // A power of two: the mask keeps the index in bounds.
        &self.slots[index & (self.slots.len() - 1)]
    }
}

/// The op a slot holds: the pointer a push stored (never null).
fn op_of(raw: *mut OpBlock) -> OpPtr {
    OpPtr(NonNull::new(raw).expect("a ring holds only the ops pushed to it"))
}

/// The producer's end: one thread pushes through it.
pub(crate) struct Producer {
    shared: Arc<Shared>,
    tail: usize,
    head_seen: usize,
}

/// The consumers' end; clones share the ring.
#[derive(Clone)]
pub(crate) struct Consumer {
    shared: Arc<Shared>,
}

/// A ring of `capacity` ops (a power of two, at least 1).
pub(crate) fn ring(capacity: usize) -> (Producer, Consumer) {
    assert!(
        capacity.is_power_of_two(),
        "a ring's capacity is a power of two, not {capacity}"
    );
    let shared = Arc::new(Shared {
        head: CachePadded::new(AtomicUsize::new(0)),
        tail: CachePadded::new(AtomicUsize::new(0)),
        slots: (0..capacity)
            .map(|_| AtomicPtr::new(ptr::null_mut()))
            .collect(),
    });
    (
        Producer {
            shared: shared.clone(),
            tail: 0,
            head_seen: 0,
        },
        Consumer { shared },
    )
}

impl Producer {
    /// Queues `op`, or hands it back when the ring is full.
    #[inline]
    pub(crate) fn push(&mut self, op: OpPtr) -> Result<(), OpPtr> {
        let s = &*self.shared;
        if self.tail - self.head_seen == s.slots.len() {
            self.head_seen = s.head.load(Ordering::Acquire);
            if self.tail - self.head_seen == s.slots.len() {
                return Err(op);
            }
        }
        s.slot(self.tail).store(op.0.as_ptr(), Ordering::Relaxed);
        self.tail += 1;
        s.tail.store(self.tail, Ordering::Release);
        Ok(())
    }
}

impl Consumer {
    /// Claims about half of the items queued, at most `out.len()`, copying
    /// them to `out`; the number claimed.
    fn claim(&self, out: &mut [*mut OpBlock]) -> Steal<usize> {
        let s = &*self.shared;
        let head = s.head.load(Ordering::Acquire);
        let tail = s.tail.load(Ordering::Acquire);
        let len = tail - head;
        if len == 0 {
            return Steal::Empty;
        }
        let n = len.div_ceil(2).min(out.len());
        for (i, o) in out[..n].iter_mut().enumerate() {
            *o = s.slot(head + i).load(Ordering::Relaxed);
        }
        match s
            .head
            .compare_exchange(head, head + n, Ordering::Release, Ordering::Relaxed)
        {
            Ok(_) => Steal::Success(n),
            Err(_) => Steal::Retry,
        }
    }

    /// The oldest op.
    pub(crate) fn steal(&self) -> Steal<OpPtr> {
        let mut one = [ptr::null_mut()];
        match self.claim(&mut one) {
            Steal::Success(_) => Steal::Success(op_of(one[0])),
            Steal::Empty => Steal::Empty,
            Steal::Retry => Steal::Retry,
        }
    }

    /// Takes about half of the ops queued (at most [`MAX_BATCH`]), the
    /// oldest first: returns the first and pushes the others onto `dest`.
    pub(crate) fn steal_batch_and_pop(&self, dest: &Worker<OpPtr>) -> Steal<OpPtr> {
        let mut batch = [ptr::null_mut(); MAX_BATCH];
        match self.claim(&mut batch) {
            Steal::Success(n) => {
                for &raw in &batch[1..n] {
                    dest.push(op_of(raw));
                }
                Steal::Success(op_of(batch[0]))
            }
            Steal::Empty => Steal::Empty,
            Steal::Retry => Steal::Retry,
        }
    }

    /// Items queued (a snapshot; `head` read first, so never below zero).
    pub(crate) fn len(&self) -> usize {
        let head = self.shared.head.load(Ordering::Acquire);
        self.shared.tail.load(Ordering::Acquire) - head
    }

    /// True when no item is queued (a snapshot).
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Ops for the tests and the loom model: the numbers 1, 2, 3, ... as
/// block addresses, never dereferenced, only compared.
#[cfg(test)]
pub(super) fn n(i: usize) -> OpPtr {
    op_of(ptr::without_provenance_mut(i))
}

/// The number an op of [`n`] stands for.
#[cfg(test)]
pub(super) fn num(op: OpPtr) -> usize {
    op.0.as_ptr().addr()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::steal_settled;

    #[test]
    fn items_come_out_in_push_order_across_the_wrap() {
        let (mut p, c) = ring(4);
        let mut next = 1;
        for _ in 0..5 {
            for k in 0..3 {
                p.push(n(next + k)).unwrap();
            }
            for k in 0..3 {
                assert_eq!(steal_settled(|| c.steal()).map(num), Some(next + k));
            }
            next += 3;
        }
        assert!(c.is_empty());
        assert!(steal_settled(|| c.steal()).is_none());
    }

    #[test]
    fn a_full_ring_hands_the_item_back_until_a_consumer_takes_one() {
        let (mut p, c) = ring(4);
        for i in 1..=4 {
            p.push(n(i)).unwrap();
        }
        assert_eq!(p.push(n(5)).map_err(num), Err(5));
        assert_eq!(c.len(), 4);
        assert_eq!(steal_settled(|| c.steal()).map(num), Some(1));
        p.push(n(5)).unwrap();
        let got: Vec<_> = std::iter::from_fn(|| steal_settled(|| c.steal()).map(num)).collect();
        assert_eq!(got, [2, 3, 4, 5]);
    }

    #[test]
    fn a_batch_takes_half_the_queue_oldest_first() {
        let (mut p, c) = ring(128);
        for i in 1..=10 {
            p.push(n(i)).unwrap();
        }
        let local = Worker::new_fifo();
        assert_eq!(
            steal_settled(|| c.steal_batch_and_pop(&local)).map(num),
            Some(1)
        );
        let moved: Vec<_> = std::iter::from_fn(|| local.pop().map(num)).collect();
        assert_eq!(moved, [2, 3, 4, 5], "half of 10, one popped");
        assert_eq!(c.len(), 5);
        // Never more than MAX_BATCH at once.
        for i in 11..=110 {
            p.push(n(i)).unwrap();
        }
        assert!(steal_settled(|| c.steal_batch_and_pop(&local)).is_some());
        assert_eq!(local.len(), MAX_BATCH - 1);
    }

    #[test]
    #[should_panic(expected = "power of two")]
    fn a_capacity_not_a_power_of_two_is_refused() {
        let _ = ring(6);
    }

    /// One producer, three consumers, a small ring that wraps many times:
    /// every item is taken exactly once, and each consumer sees the items
    /// it took in push order.
    #[test]
    fn stress_every_item_taken_once() {
        use std::sync::atomic::AtomicBool;
        const ITEMS: usize = 200_000;
        let (mut p, c) = ring(64);
        let done = Arc::new(AtomicBool::new(false));
        let consumers: Vec<_> = (0..3)
            .map(|k| {
                let (c, done) = (c.clone(), done.clone());
                std::thread::spawn(move || {
                    let local = Worker::new_fifo();
                    let mut got = Vec::new();
                    let mut last = 0;
                    loop {
                        let item = if k == 0 {
                            steal_settled(|| c.steal())
                        } else {
                            local
                                .pop()
                                .or_else(|| steal_settled(|| c.steal_batch_and_pop(&local)))
                        };
                        match item.map(num) {
                            Some(i) => {
                                assert!(i > last, "consumer {k} took {i} after {last}");
                                last = i;
                                got.push(i);
                            }
                            // Read before the ring: once set, nothing more
                            // comes, so an empty ring then stays empty.
                            None if done.load(Ordering::SeqCst) && c.is_empty() => break,
                            None => std::thread::yield_now(),
                        }
                    }
                    got
                })
            })
            .collect();
        for i in 1..=ITEMS {
            let mut item = n(i);
            while let Err(back) = p.push(item) {
                item = back;
                std::thread::yield_now();
            }
        }
        done.store(true, Ordering::SeqCst);
        let mut all: Vec<usize> = consumers
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        all.sort_unstable();
        assert_eq!(all.len(), ITEMS);
        assert!(all.iter().enumerate().all(|(k, &i)| i == k + 1));
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::sync::{loom_model, steal_settled};

    /// A ring of two, three items, and two consumers (one stealing one at
    /// a time, one in batches) racing the producer through the wrap: each
    /// item is taken exactly once, whatever the interleaving.
    #[test]
    fn every_item_is_taken_once_through_the_wrap() {
        loom_model(|| {
            let (mut p, c) = ring(2);
            let c2 = c.clone();
            let batcher = loom::thread::spawn(move || {
                let local = Worker::new_fifo();
                let mut got = Vec::new();
                for _ in 0..2 {
                    if let Some(i) = steal_settled(|| c2.steal_batch_and_pop(&local)).map(num) {
                        got.push(i);
                    }
                    while let Some(i) = local.pop().map(num) {
                        got.push(i);
                    }
                }
                got
            });
            let mut got = Vec::new();
            for i in 1..=3 {
                let mut item = n(i);
                while let Err(back) = p.push(item) {
                    item = back;
                    // Full: take one ourselves, as a second consumer.
                    if let Some(j) = steal_settled(|| c.steal()).map(num) {
                        got.push(j);
                    }
                }
            }
            while let Some(j) = steal_settled(|| c.steal()).map(num) {
                got.push(j);
            }
            got.extend(batcher.join().unwrap());
            got.sort_unstable();
            assert_eq!(got, [1, 2, 3]);
        });
    }
}
