//! Allocate/free pairs of mixed sizes: the pools against the naive manager
//! and the system allocator (`std::alloc` with the same 64-byte alignment).
//!
//! Each thread keeps a ring of `WINDOW` live blocks; one iteration frees the
//! oldest block of the ring and allocates a new one in its place (one pair),
//! with sizes drawn once, log-uniformly from 64 B to 512 KiB, by a fixed
//! seed. The first byte of every block is written, so that the system's
//! lazily mapped pages are paid for where they are.
//!
//! Run: `cargo bench --bench storage`.

use std::alloc::{self, Layout};
use std::hint::black_box;
use std::ptr::NonNull;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use depengine::storage::{Allocation, DeviceId, PoolType, Storage, StorageConfig};
use depengine::util::rng::SplitMix64;

const WINDOW: usize = 16;
const ALIGN: usize = 64;

/// Mixed request sizes, log-uniform in 64 B ..= 512 KiB.
fn sizes(seed: u64) -> Vec<usize> {
    let mut rng = SplitMix64::new(seed);
    (0..4096)
        .map(|_| {
            let exp = rng.range_inclusive(6, 18);
            let base = 1usize << exp;
            base + rng.below(base as u64) as usize
        })
        .collect()
}

/// What is measured: a storage manager, or the system allocator directly.
#[derive(Clone)]
enum Contender {
    System,
    Manager(Arc<dyn Storage>),
}

enum Block {
    System(NonNull<u8>, Layout),
    Managed(Allocation),
}

impl Contender {
    fn name(&self) -> &'static str {
        match self {
            Contender::System => "system",
            Contender::Manager(m) => m.pool_type().name(),
        }
    }

    fn allocate(&self, size: usize) -> Block {
        let block = match self {
            Contender::System => {
                let layout = Layout::from_size_align(size, ALIGN).expect("valid layout");
                // SAFETY: `size` is at least 64, so the layout is not zero-sized.
                let ptr = NonNull::new(unsafe { alloc::alloc(layout) }).expect("out of memory");
                Block::System(ptr, layout)
            }
            Contender::Manager(m) => Block::Managed(m.allocate(size).expect("out of memory")),
        };
        let ptr = match &block {
            Block::System(p, _) => p.as_ptr(),
            Block::Managed(a) => a.as_ptr(),
        };
        // SAFETY: the block holds at least 64 bytes and belongs to this
        // thread alone.
        unsafe { ptr.write_volatile(1) };
        block
    }

    fn free(&self, block: Block) {
        match (self, block) {
            (Contender::System, Block::System(ptr, layout)) => {
                // SAFETY: allocated just above with this layout, freed once.
                unsafe { alloc::dealloc(ptr.as_ptr(), layout) }
            }
            (Contender::Manager(m), Block::Managed(a)) => m.free(a).expect("own allocation"),
            _ => unreachable!("blocks go back where they came from"),
        }
    }

    /// `iters` pairs over a ring of `WINDOW` blocks; the time they took.
    fn run(&self, iters: u64, sizes: &[usize]) -> Duration {
        let mut ring: Vec<Option<Block>> = (0..WINDOW).map(|_| None).collect();
        let start = Instant::now();
        for i in 0..iters as usize {
            let slot = &mut ring[i % WINDOW];
            if let Some(old) = slot.take() {
                self.free(old);
            }
            *slot = Some(self.allocate(black_box(sizes[i % sizes.len()])));
        }
        let elapsed = start.elapsed();
        for block in ring.into_iter().flatten() {
            self.free(block);
        }
        elapsed
    }
}

fn contenders() -> Vec<Contender> {
    let mut all = vec![Contender::System];
    for kind in [
        PoolType::Naive,
        PoolType::Exact,
        PoolType::Round,
        PoolType::Unpooled,
    ] {
        let config = StorageConfig::builder().pool_type(kind).build().unwrap();
        all.push(Contender::Manager(config.create(DeviceId::cpu(0))));
    }
    all
}

fn one_thread(c: &mut Criterion) {
    let sizes = sizes(1);
    let mut group = c.benchmark_group("storage_alloc_free_1_thread");
    group.throughput(Throughput::Elements(1));
    for contender in contenders() {
        group.bench_function(BenchmarkId::from_parameter(contender.name()), |b| {
            b.iter_custom(|iters| contender.run(iters, &sizes))
        });
    }
    group.finish();
}

fn two_threads(c: &mut Criterion) {
    let sizes = [sizes(2), sizes(3)];
    let mut group = c.benchmark_group("storage_alloc_free_2_threads");
    // One iteration: one pair on each thread.
    group.throughput(Throughput::Elements(2));
    for contender in contenders() {
        group.bench_function(BenchmarkId::from_parameter(contender.name()), |b| {
            b.iter_custom(|iters| {
                let barrier = Barrier::new(3);
                std::thread::scope(|s| {
                    for sizes in &sizes {
                        let contender = contender.clone();
                        let barrier = &barrier;
                        s.spawn(move || {
                            barrier.wait();
                            contender.run(iters, sizes);
                            barrier.wait();
                        });
                    }
                    barrier.wait();
                    let start = Instant::now();
                    barrier.wait();
                    start.elapsed()
                })
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = one_thread, two_threads
}
criterion_main!(benches);
