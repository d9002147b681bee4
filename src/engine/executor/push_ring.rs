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
//! deque lost to crossbeam's `Injector` from 4 workers on (`BENCHMARKS.md`,
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

use std::ptr;

use crate::sync::deque::{Steal, Worker};
use crate::sync::{Arc, AtomicPtr, AtomicUsize, CachePadded, Ordering};

/// Items a consumer takes at most in one swap.
pub(crate) const MAX_BATCH: usize = 32;

/// What a ring holds: a value that is a non-null pointer.
pub(crate) trait RingItem: Copy {
    /// What the pointer points to.
    type Target;
    /// The pointer (never null).
    fn into_raw(self) -> *mut Self::Target;
    /// The value again, from a pointer [`RingItem::into_raw`] gave.
    fn from_raw(raw: *mut Self::Target) -> Self;
}

struct Shared<E> {
    /// The next index a consumer takes.
    head: CachePadded<AtomicUsize>,
    /// One past the last index the producer published.
    tail: CachePadded<AtomicUsize>,
    slots: Box<[AtomicPtr<E>]>,
}

impl<E> Shared<E> {
    fn slot(&self, index: usize) -> &AtomicPtr<E> {
        // A power of two: the mask keeps the index in bounds.
        &self.slots[index & (self.slots.len() - 1)]
    }
}

/// The producer's end: one thread pushes through it.
pub(crate) struct Producer<T: RingItem> {
    shared: Arc<Shared<T::Target>>,
    tail: usize,
    head_seen: usize,
}

/// The consumers' end; clones share the ring.
pub(crate) struct Consumer<T: RingItem> {
    shared: Arc<Shared<T::Target>>,
}

impl<T: RingItem> Clone for Consumer<T> {
    fn clone(&self) -> Self {
        Consumer {
            shared: self.shared.clone(),
        }
    }
}

/// A ring of `capacity` items (a power of two, at least 1).
pub(crate) fn ring<T: RingItem>(capacity: usize) -> (Producer<T>, Consumer<T>) {
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

impl<T: RingItem> Producer<T> {
    /// Queues `item`, or hands it back when the ring is full.
    #[inline]
    pub(crate) fn push(&mut self, item: T) -> Result<(), T> {
        let s = &*self.shared;
        if self.tail - self.head_seen == s.slots.len() {
            self.head_seen = s.head.load(Ordering::Acquire);
            if self.tail - self.head_seen == s.slots.len() {
                return Err(item);
            }
        }
        s.slot(self.tail).store(item.into_raw(), Ordering::Relaxed);
        self.tail += 1;
        s.tail.store(self.tail, Ordering::Release);
        Ok(())
    }
}

impl<T: RingItem> Consumer<T> {
    /// Claims up to `most(len)` of the `len` items queued, copying them to
    /// `out` (at most [`MAX_BATCH`]); the number claimed.
    fn claim(&self, most: impl Fn(usize) -> usize, out: &mut [*mut T::Target]) -> Steal<usize> {
        let s = &*self.shared;
        let head = s.head.load(Ordering::Acquire);
        let tail = s.tail.load(Ordering::Acquire);
        let len = tail - head;
        if len == 0 {
            return Steal::Empty;
        }
        let n = most(len).clamp(1, out.len());
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

    /// The oldest item.
    pub(crate) fn steal(&self) -> Steal<T> {
        let mut one = [ptr::null_mut()];
        match self.claim(|_| 1, &mut one) {
            Steal::Success(_) => Steal::Success(T::from_raw(one[0])),
            Steal::Empty => Steal::Empty,
            Steal::Retry => Steal::Retry,
        }
    }

    /// Takes about half of the items queued (at most [`MAX_BATCH`]), the
    /// oldest first: returns the first and pushes the others onto `dest`.
    pub(crate) fn steal_batch_and_pop(&self, dest: &Worker<T>) -> Steal<T> {
        let mut batch = [ptr::null_mut(); MAX_BATCH];
        match self.claim(|len| len.div_ceil(2), &mut batch) {
            Steal::Success(n) => {
                for &raw in &batch[1..n] {
                    dest.push(T::from_raw(raw));
                }
                Steal::Success(T::from_raw(batch[0]))
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

/// Items for the tests and the loom model: the numbers 1, 2, 3, ... as
/// pointers, never dereferenced, only compared.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq)]
struct N(usize);

#[cfg(test)]
impl RingItem for N {
    type Target = u8;
    fn into_raw(self) -> *mut u8 {
        ptr::without_provenance_mut(self.0)
    }
    fn from_raw(raw: *mut u8) -> Self {
        N(raw.addr())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::steal_settled;

    #[test]
    fn items_come_out_in_push_order_across_the_wrap() {
        let (mut p, c) = ring::<N>(4);
        let mut next = 1;
        for _ in 0..5 {
            for k in 0..3 {
                p.push(N(next + k)).unwrap();
            }
            for k in 0..3 {
                assert_eq!(steal_settled(|| c.steal()), Some(N(next + k)));
            }
            next += 3;
        }
        assert!(c.is_empty());
        assert!(steal_settled(|| c.steal()).is_none());
    }

    #[test]
    fn a_full_ring_hands_the_item_back_until_a_consumer_takes_one() {
        let (mut p, c) = ring::<N>(4);
        for i in 1..=4 {
            p.push(N(i)).unwrap();
        }
        assert_eq!(p.push(N(5)), Err(N(5)));
        assert_eq!(c.len(), 4);
        assert_eq!(steal_settled(|| c.steal()), Some(N(1)));
        p.push(N(5)).unwrap();
        let got: Vec<_> = std::iter::from_fn(|| steal_settled(|| c.steal())).collect();
        assert_eq!(got, [N(2), N(3), N(4), N(5)]);
    }

    #[test]
    fn a_batch_takes_half_the_queue_oldest_first() {
        let (mut p, c) = ring::<N>(128);
        for i in 1..=10 {
            p.push(N(i)).unwrap();
        }
        let local = Worker::new_fifo();
        assert_eq!(steal_settled(|| c.steal_batch_and_pop(&local)), Some(N(1)));
        let moved: Vec<_> = std::iter::from_fn(|| local.pop()).collect();
        assert_eq!(moved, [N(2), N(3), N(4), N(5)], "half of 10, one popped");
        assert_eq!(c.len(), 5);
        // Never more than MAX_BATCH at once.
        for i in 11..=110 {
            p.push(N(i)).unwrap();
        }
        assert!(steal_settled(|| c.steal_batch_and_pop(&local)).is_some());
        assert_eq!(local.len(), MAX_BATCH - 1);
    }

    #[test]
    #[should_panic(expected = "power of two")]
    fn a_capacity_not_a_power_of_two_is_refused() {
        let _ = ring::<N>(6);
    }

    /// One producer, three consumers, a small ring that wraps many times:
    /// every item is taken exactly once, and each consumer sees the items
    /// it took in push order.
    #[test]
    fn stress_every_item_taken_once() {
        use std::sync::atomic::AtomicBool;
        const ITEMS: usize = 200_000;
        let (mut p, c) = ring::<N>(64);
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
                        match item {
                            Some(N(i)) => {
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
            let mut item = N(i);
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
            let (mut p, c) = ring::<N>(2);
            let c2 = c.clone();
            let batcher = loom::thread::spawn(move || {
                let local = Worker::new_fifo();
                let mut got = Vec::new();
                for _ in 0..2 {
                    if let Some(N(i)) = steal_settled(|| c2.steal_batch_and_pop(&local)) {
                        got.push(i);
                    }
                    while let Some(N(i)) = local.pop() {
                        got.push(i);
                    }
                }
                got
            });
            let mut got = Vec::new();
            for i in 1..=3 {
                let mut item = N(i);
                while let Err(back) = p.push(item) {
                    item = back;
                    // Full: take one ourselves, as a second consumer.
                    if let Some(N(j)) = steal_settled(|| c.steal()) {
                        got.push(j);
                    }
                }
            }
            while let Some(N(j)) = steal_settled(|| c.steal()) {
                got.push(j);
            }
            got.extend(batcher.join().unwrap());
            got.sort_unstable();
            assert_eq!(got, [1, 2, 3]);
        });
    }
}
