//! Real models: the exact mode reaches the lower bound where the greedy
//! planners do not (convnext_tiny, mp_hand_landmark_full, and a training
//! graph whose widest ops leave no slack at all).

use depengine::plan::*;

fn load(name: &str) -> Records {
    Records::load(format!(
        "{}/tests/data/{name}.records.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

#[test]
fn exact_reaches_the_lower_bound_where_greedy_does_not() {
    for model in [
        "convnext_tiny",
        "mp_hand_landmark_full",
        "mobilenet_v2_train_b8",
    ] {
        let r = load(model);
        let lb = lower_bound(&r.records);
        let greedy = offsets_greedy_by_size(&r.records, None, 1);
        assert!(
            greedy.total_size > lb,
            "{model}: greedy by size already at the bound"
        );
        // Deterministic limits only: a node budget, no clock.
        let out = exact(&r.records, None, &ExactOptions::default());
        validate_offsets(&r.records, None, &out.plan, 1).unwrap();
        assert_eq!(out.plan.total_size, lb, "{model}");
        assert_eq!(out.fits, Fits::Yes, "{model}: optimality not proven");
        // And with the bound as capacity, the answer is yes.
        let at = exact(
            &r.records,
            None,
            &ExactOptions {
                capacity: Some(lb),
                ..ExactOptions::default()
            },
        );
        assert_eq!(at.fits, Fits::Yes, "{model}");
        assert!(at.plan.total_size <= lb);
        validate_offsets(&r.records, None, &at.plan, 1).unwrap();
    }
}

/// The largest real model of the shared data (1,104 records): `improve`
/// alone reaches its lower bound (greedy by size is 1% above it), with its
/// deterministic effort and no clock. It needs the bounded canonical search
/// on the records themselves, which `improve` used to skip past 1,000
/// records.
#[test]
fn improve_alone_reaches_the_bound_on_the_largest_model() {
    let r = load("efficientnet_b0_train_b8");
    assert_eq!(r.records.len(), 1104);
    let lb = lower_bound(&r.records);
    let greedy = offsets_greedy_by_size(&r.records, None, 1);
    assert!(greedy.total_size > lb);
    let out = improve(&r.records, None, &ImproveOptions::default());
    validate_offsets(&r.records, None, &out, 1).unwrap();
    assert_eq!(out.total_size, lb);
}
