//! A small pipeline on the engine: tensors from the pooled storage manager,
//! a compute op, an async "device" op completed from another thread, a
//! reduction, and deletion by dropping the last handles.
//!
//! Run with `cargo run --release --example pipeline`.

use std::error::Error;

use depengine::storage::{DeviceId, StorageConfig, Tensor};
use depengine::{Engine, OpDesc, Property};

fn main() -> Result<(), Box<dyn Error>> {
    let engine = Engine::builder().build()?;
    let storage = StorageConfig::default().create(DeviceId::cpu(0));

    let n = 1 << 16;
    let input: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = Tensor::from_slice(&engine, &storage, &input)?;
    let y = Tensor::<f32>::new(&engine, &storage, n)?;
    let sum = Tensor::<f64>::new(&engine, &storage, 1)?;

    // y = 3x + 1, on a worker.
    let (xc, yc) = (x.clone(), y.clone());
    engine.push(
        OpDesc::new("y = 3x + 1").reads(x.var()).writes(y.var()),
        move |ctx| {
            let x = xc.read(ctx)?;
            let mut y = yc.write(ctx)?;
            for (y, x) in y.iter_mut().zip(x.iter()) {
                *y = 3.0 * x + 1.0;
            }
            Ok(())
        },
    )?;

    // An async op: its body hands the work to another thread (a stand-in
    // for a device queue), which completes the op when done. Until then the
    // op holds y for writing, so the sum below waits for it.
    let len = y.len();
    engine.push_async(
        OpDesc::new("announce y to a device thread")
            .writes(y.var())
            .property(Property::Async),
        move |ctx, done| {
            let name = ctx.name().to_string();
            std::thread::spawn(move || {
                println!("{name}: {len} elements ready");
                done.done();
            });
        },
    )?;

    // sum = Σ y, after both writers of y.
    let (yc, sc) = (y.clone(), sum.clone());
    engine.push(
        OpDesc::new("sum").reads(y.var()).writes(sum.var()),
        move |ctx| {
            let y = yc.read(ctx)?;
            sc.write(ctx)?[0] = y.iter().map(|&v| v as f64).sum();
            Ok(())
        },
    )?;

    let total = sum.to_vec()?[0];
    let expected: f64 = input.iter().map(|&v| 3.0 * v as f64 + 1.0).sum();
    println!("sum = {total} (expected {expected})");
    assert_eq!(total, expected);

    // Dropping the last handles pushes the deletion ops; the memory returns
    // to the pool once the ops that declared the tensors have finished.
    drop((x, y, sum));
    engine.wait_for_all()?;
    let stats = storage.stats();
    println!(
        "pool: {} bytes in use, {} bytes cached, peak {} bytes",
        stats.in_use, stats.cached, stats.peak_in_use
    );
    assert_eq!(stats.in_use, 0);
    Ok(())
}
