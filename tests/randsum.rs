//! MXNet's `RandSumExpr` acceptance test, ported: random ops over 100 vars,
//! each writes one var with the sum of 2–19 random reads divided by
//! (reads + 1); the engine's result must equal a serial run bit for bit, on
//! every executor and worker count, with sync and async completion from
//! foreign threads, and with random priorities.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use depengine::util::rng::SplitMix64;
use depengine::{Completion, Engine, EngineKind, OpDesc, Property, Var};

const VARS: usize = 100;
const OPS: usize = 10_000;
const REPEATS: usize = 5;

#[derive(Clone)]
struct Expr {
    write: usize,
    reads: Vec<usize>,
    spin: u32,
    priority: i32,
}

fn exprs(seed: u64) -> Vec<Expr> {
    let mut rng = SplitMix64::new(seed);
    (0..OPS)
        .map(|_| {
            let n = rng.range_inclusive(2, 19) as usize;
            Expr {
                write: rng.below(VARS as u64) as usize,
                reads: (0..n).map(|_| rng.below(VARS as u64) as usize).collect(),
                spin: rng.below(64) as u32,
                priority: rng.below(7) as i32 - 3,
            }
        })
        .collect()
}

fn eval(values: &[f64], e: &Expr) -> f64 {
    let mut sum = 0.0;
    for &r in &e.reads {
        sum += values[r];
    }
    sum / (e.reads.len() + 1) as f64
}

fn serial(exprs: &[Expr]) -> Vec<f64> {
    let mut values: Vec<f64> = (0..VARS).map(|i| i as f64).collect();
    for _ in 0..REPEATS {
        for e in exprs {
            values[e.write] = eval(&values, e);
        }
    }
    values
}

/// The shared values; the engine's ordering is what makes the unsynchronised
/// pattern (readers and one writer per var) correct, and the mutex only
/// satisfies Rust — it is never contended in a way that orders anything.
type Values = Arc<Vec<Mutex<f64>>>;

/// A closure run on a foreign "device" thread.
type Job = Box<dyn FnOnce() + Send>;

fn snapshot(values: &Values, e: &Expr) -> f64 {
    let mut sum = 0.0;
    for &r in &e.reads {
        sum += *values[r].lock().unwrap();
    }
    sum / (e.reads.len() + 1) as f64
}

fn busy(spin: u32) {
    for _ in 0..spin {
        std::hint::spin_loop();
    }
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    Sync,
    AsyncForeign,
    Priorities,
}

fn run(engine: &Engine, exprs: &[Expr], mode: Mode, completer: &mpsc::Sender<Job>) -> Vec<f64> {
    let vars: Vec<Var> = (0..VARS).map(|_| engine.new_var()).collect();
    let values: Values = Arc::new((0..VARS).map(|i| Mutex::new(i as f64)).collect());
    for _ in 0..REPEATS {
        for e in exprs {
            let reads: Vec<&Var> = e.reads.iter().map(|&r| &vars[r]).collect();
            let mut desc = OpDesc::new("randsum").reads(&reads).writes(&vars[e.write]);
            let (vals, expr) = (values.clone(), e.clone());
            match mode {
                Mode::Sync | Mode::Priorities => {
                    if let Mode::Priorities = mode {
                        desc = desc.priority(e.priority);
                        if e.priority > 1 {
                            desc = desc.property(Property::CpuPrioritized);
                        }
                    }
                    engine
                        .push(desc, move |_| {
                            busy(expr.spin);
                            let v = snapshot(&vals, &expr);
                            *vals[expr.write].lock().unwrap() = v;
                            Ok(())
                        })
                        .unwrap();
                }
                Mode::AsyncForeign => {
                    let tx = completer.clone();
                    engine
                        .push_async(desc, move |_, done: Completion| {
                            tx.send(Box::new(move || {
                                busy(expr.spin);
                                let v = snapshot(&vals, &expr);
                                *vals[expr.write].lock().unwrap() = v;
                                done.done();
                            }))
                            .unwrap();
                        })
                        .unwrap();
                }
            }
        }
    }
    engine.wait_for_all().unwrap();
    let out = values.iter().map(|m| *m.lock().unwrap()).collect();
    for v in vars {
        engine.delete_var(v).unwrap();
    }
    engine.wait_for_all().unwrap();
    out
}

/// Two foreign threads that run closures handed to them (the "device").
fn completers() -> (mpsc::Sender<Job>, Vec<std::thread::JoinHandle<()>>) {
    let (tx, rx) = mpsc::channel::<Job>();
    let rx = Arc::new(Mutex::new(rx));
    let handles = (0..2)
        .map(|_| {
            let rx = rx.clone();
            std::thread::spawn(move || loop {
                let job = rx.lock().unwrap().recv();
                match job {
                    Ok(job) => job(),
                    Err(_) => return,
                }
            })
        })
        .collect();
    (tx, handles)
}

fn check(kind: EngineKind, workers: usize) {
    let exprs = exprs(0x5EED ^ workers as u64);
    let expected = serial(&exprs);
    let engine = Engine::builder()
        .kind(kind)
        .cpu_workers(workers)
        .cpu_priority_workers(workers)
        .build()
        .unwrap();
    let (tx, handles) = completers();
    for mode in [Mode::Sync, Mode::AsyncForeign, Mode::Priorities] {
        let got = run(&engine, &exprs, mode, &tx);
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(
                g.to_bits(),
                e.to_bits(),
                "{kind:?} x{workers} {mode:?}: var {i} is {g}, serial run gives {e}"
            );
        }
    }
    drop(tx);
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn randsum_naive() {
    check(EngineKind::Naive, 1);
}

#[test]
fn randsum_pooled_1() {
    check(EngineKind::Pooled, 1);
}

#[test]
fn randsum_pooled_2() {
    check(EngineKind::Pooled, 2);
}

#[test]
fn randsum_pooled_4() {
    check(EngineKind::Pooled, 4);
}

#[test]
fn randsum_per_device_1() {
    check(EngineKind::PerDevice, 1);
}

#[test]
fn randsum_per_device_2() {
    check(EngineKind::PerDevice, 2);
}

#[test]
fn randsum_per_device_4() {
    check(EngineKind::PerDevice, 4);
}
