//! Op bodies of every size: small ones are stored in the op block, big or
//! over-aligned ones are boxed. Whatever the storage, a body runs at most
//! once and its captures are dropped exactly once, whether it ran,
//! panicked, was skipped, or was never pushed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use depengine::{Engine, EngineError, EngineKind, FailureKind, OpDesc, OpError};

fn engines() -> Vec<Engine> {
    [EngineKind::Naive, EngineKind::Pooled, EngineKind::PerDevice]
        .into_iter()
        .map(|k| Engine::builder().kind(k).cpu_workers(2).build().unwrap())
        .collect()
}

/// Counts its drops.
struct Tally(Arc<AtomicUsize>);

impl Drop for Tally {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A capture aligned beyond a word: never stored inline.
#[repr(align(64))]
struct Aligned(u64);

fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.to_string().contains("expected test panic") {
                default(info);
            }
        }));
    });
}

#[test]
fn bodies_of_every_size_run_once_and_drop_once() {
    const OPS: usize = 2_000;
    for engine in engines() {
        let v = engine.new_var();
        let drops = Arc::new(AtomicUsize::new(0));
        let sum = Arc::new(AtomicUsize::new(0));
        for i in 0..OPS {
            let t = Tally(drops.clone());
            let s = sum.clone();
            let desc = OpDesc::new("body").writes(&v);
            match i % 4 {
                // Two words: inline.
                0 => engine.push(desc, move |_| {
                    let _t = &t;
                    s.fetch_add(i, Ordering::SeqCst);
                    Ok(())
                }),
                // Six words: boxed.
                1 => {
                    let pad = [i; 3];
                    engine.push(desc, move |_| {
                        let _t = &t;
                        s.fetch_add(pad[0] + pad[1] + pad[2] - 2 * i, Ordering::SeqCst);
                        Ok(())
                    })
                }
                // Over-aligned: boxed.
                2 => {
                    let a = Aligned(i as u64);
                    engine.push(desc, move |_| {
                        let _t = &t;
                        s.fetch_add(a.0 as usize, Ordering::SeqCst);
                        Ok(())
                    })
                }
                // Async, three words: inline; completed on another thread.
                _ => engine.push_async(desc, move |_, completion| {
                    std::thread::spawn(move || {
                        s.fetch_add(i, Ordering::SeqCst);
                        drop(t);
                        completion.done();
                    });
                }),
            }
            .unwrap();
        }
        engine.wait_for_all().unwrap();
        assert_eq!(
            sum.load(Ordering::SeqCst),
            OPS * (OPS - 1) / 2,
            "{:?}",
            engine.kind()
        );
        assert_eq!(drops.load(Ordering::SeqCst), OPS, "{:?}", engine.kind());
        assert_eq!(v.version(), OPS as u64);
    }
}

#[test]
fn skipped_bodies_are_dropped_unrun() {
    for engine in engines() {
        let v = engine.new_var();
        engine
            .push(OpDesc::new("fails").writes(&v), |_| {
                Err(OpError::msg("first"))
            })
            .unwrap();
        let drops = Arc::new(AtomicUsize::new(0));
        let runs = Arc::new(AtomicUsize::new(0));
        for _ in 0..10 {
            let t = Tally(drops.clone());
            let r = runs.clone();
            engine
                .push(OpDesc::new("skipped").reads(&v), move |_| {
                    let _t = &t;
                    r.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
                .unwrap();
        }
        let err = engine.wait_for_all().unwrap_err();
        assert_eq!(err.failure().unwrap().op, "fails");
        assert_eq!(runs.load(Ordering::SeqCst), 0, "{:?}", engine.kind());
        assert_eq!(drops.load(Ordering::SeqCst), 10, "{:?}", engine.kind());
    }
}

#[test]
fn a_panicking_small_body_fails_its_op_and_drops_its_captures_once() {
    quiet_panics();
    for engine in engines() {
        let v = engine.new_var();
        let drops = Arc::new(AtomicUsize::new(0));
        let t = Tally(drops.clone());
        engine
            .push(OpDesc::new("panics").writes(&v), move |_| {
                let _t = &t;
                panic!("expected test panic")
            })
            .unwrap();
        let f = engine
            .wait_for_var(&v)
            .unwrap_err()
            .failure()
            .unwrap()
            .clone();
        assert_eq!(f.kind, FailureKind::Panic);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "{:?}", engine.kind());
    }
}

#[test]
fn a_body_refused_at_push_is_dropped_unrun() {
    for engine in engines() {
        let v = engine.new_var();
        engine.shutdown().unwrap();
        let drops = Arc::new(AtomicUsize::new(0));
        let t = Tally(drops.clone());
        let err = engine
            .push(OpDesc::new("late").writes(&v), move |_| {
                let _t = &t;
                panic!("must not run")
            })
            .unwrap_err();
        assert!(matches!(err, EngineError::ShutDown { .. }), "{err}");
        assert_eq!(drops.load(Ordering::SeqCst), 1, "{:?}", engine.kind());
    }
}
