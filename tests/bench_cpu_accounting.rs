//! `bench --cpu-time`'s accounting on a real run. Alone in its test binary:
//! the accounting finds a pool's workers by their thread names, and the
//! engines of tests running beside it in one process would have workers
//! of the same names (the library's own tests ran it with them, and now
//! and then counted two workers for a pool of one).

use depengine::bench::{account_cpu, cpu_accounting_supported, run_trace, Spec, Workload};
use depengine::Engine;

#[test]
fn runs_carry_cpu_use_only_while_accounting_is_on() {
    let engine = Engine::builder().cpu_workers(1).build().unwrap();
    let trace = Spec::new(Workload::Indep, 1000).trace();
    let off = run_trace(&engine, &trace, None).unwrap();
    assert!(off.cpu.is_none());
    let pool = engine.pools()[0].0.clone();
    account_cpu(Some(&pool));
    let on = run_trace(&engine, &trace, None);
    account_cpu(None);
    let on = on.unwrap();
    if cpu_accounting_supported() {
        let cpu = on.cpu.expect("accounting on: the run has its CPU use");
        assert_eq!(cpu.workers, 1, "{cpu:?}");
        assert!(cpu.pusher_ns > 0, "{cpu:?}");
    }
}
