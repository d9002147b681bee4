//! Unit tests of the storage internals: parsing, validation, sharding, the
//! thread-safety contract.

use std::collections::HashMap;

use super::config::{parse_bytes, parse_cutoff};
use super::pool::SHARDS;
use super::*;

fn build_from(vars: &[(&str, &str)]) -> Result<StorageConfig, BuildError> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    StorageBuilder::new()
        .env_from(|var| map.get(var).cloned())?
        .build()
}

#[test]
fn handles_and_managers_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Allocation>();
    send_sync::<OwnedAllocation>();
    send_sync::<NaiveStorage>();
    send_sync::<PooledStorage>();
    send_sync::<UnpooledStorage>();
    send_sync::<Storages>();
    send_sync::<crate::sync::Arc<dyn Storage>>();
    send_sync::<StorageError>();
    send_sync::<FreeError>();
    send_sync::<BuildError>();
}

#[test]
fn byte_counts_parse_with_suffixes() {
    assert_eq!(parse_bytes("4096"), Ok(4096));
    assert_eq!(parse_bytes(" 4KiB "), Ok(4096));
    assert_eq!(parse_bytes("4k"), Ok(4096));
    assert_eq!(parse_bytes("16MiB"), Ok(16 << 20));
    assert_eq!(parse_bytes("2G"), Ok(2 << 30));
    assert!(parse_bytes("abc").is_err());
    assert!(parse_bytes("-1").is_err());
    assert!(parse_bytes("4 TiB").is_err());
    assert!(parse_bytes("99999999999999999999").is_err());
}

#[test]
fn cutoff_is_an_exponent_or_a_power_of_two() {
    assert_eq!(parse_cutoff("20"), Ok(1 << 20));
    assert_eq!(parse_cutoff("24"), Ok(1 << 24));
    assert_eq!(parse_cutoff("1MiB"), Ok(1 << 20));
    assert_eq!(parse_cutoff("1048576"), Ok(1 << 20));
    assert!(parse_cutoff("1000000").is_err());
    // 64 and above are bytes; below, exponents.
    assert_eq!(parse_cutoff("64"), Ok(64));
    assert_eq!(parse_cutoff("12"), Ok(4096));
    assert!(parse_cutoff("100").is_err());
}

#[test]
fn environment_sets_every_setting() {
    let c = build_from(&[
        ("DEPENGINE_STORAGE_POOL_TYPE", "Round"),
        ("DEPENGINE_STORAGE_PAGE_SIZE", "8KiB"),
        ("DEPENGINE_STORAGE_ROUND_CUTOFF", "20"),
        ("DEPENGINE_STORAGE_RESERVE_PERCENT", "10"),
        ("DEPENGINE_STORAGE_LIMIT_BYTES", "64MiB"),
    ])
    .unwrap();
    assert_eq!(c.pool_type(), PoolType::Round);
    assert_eq!(c.page_size(), 8192);
    assert_eq!(c.round_cutoff(), 1 << 20);
    assert_eq!(c.reserve_percent(), 10);
    assert_eq!(c.limit_bytes(), Some(64 << 20));
    assert_eq!(
        c.rounding(),
        rounding::Rounding::Round {
            page: 8192,
            cutoff: 1 << 20
        }
    );

    let d = build_from(&[
        ("DEPENGINE_STORAGE_POOL_TYPE", ""),
        ("DEPENGINE_STORAGE_LIMIT_BYTES", "0"),
    ])
    .unwrap();
    assert_eq!(d, StorageConfig::default());
    for (name, kind) in [
        ("naive", PoolType::Naive),
        ("pooled", PoolType::Exact),
        ("EXACT", PoolType::Exact),
        ("unpooled", PoolType::Unpooled),
    ] {
        let c = build_from(&[("DEPENGINE_STORAGE_POOL_TYPE", name)]).unwrap();
        assert_eq!(c.pool_type(), kind);
        assert_eq!(kind.name().parse::<PoolType>(), Ok(kind));
    }
}

#[test]
fn a_bad_variable_is_an_error_naming_it() {
    for (var, value) in [
        ("DEPENGINE_STORAGE_POOL_TYPE", "Fancy"),
        ("DEPENGINE_STORAGE_PAGE_SIZE", "big"),
        ("DEPENGINE_STORAGE_ROUND_CUTOFF", "1000"),
        ("DEPENGINE_STORAGE_RESERVE_PERCENT", "five"),
        ("DEPENGINE_STORAGE_LIMIT_BYTES", "12 parsecs"),
    ] {
        let err = build_from(&[(var, value)]).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(var), "{msg}");
        assert!(msg.contains(value), "{msg}");
        assert!(matches!(err, BuildError::BadVariable { var: v, .. } if v == var));
    }
}

#[test]
fn out_of_range_settings_are_errors_naming_them() {
    let cases: [(StorageBuilder, &str); 7] = [
        (
            StorageBuilder::new().page_size(3000),
            "DEPENGINE_STORAGE_PAGE_SIZE",
        ),
        (
            StorageBuilder::new().page_size(32).alignment(64),
            "page_size",
        ),
        (
            StorageBuilder::new().round_cutoff(1 << 10),
            "DEPENGINE_STORAGE_ROUND_CUTOFF",
        ),
        (
            StorageBuilder::new().reserve_percent(100),
            "DEPENGINE_STORAGE_RESERVE_PERCENT",
        ),
        (
            StorageBuilder::new().limit_bytes(Some(100)),
            "DEPENGINE_STORAGE_LIMIT_BYTES",
        ),
        (StorageBuilder::new().alignment(32), "alignment"),
        (
            StorageBuilder::new().large_threshold(5000),
            "large_threshold",
        ),
    ];
    for (builder, needle) in cases {
        let err = builder.build().unwrap_err();
        assert!(matches!(err, BuildError::Invalid { .. }), "{err:?}");
        assert!(err.to_string().contains(needle), "{err}");
    }
    // The environment's values are checked the same way.
    let err = build_from(&[("DEPENGINE_STORAGE_RESERVE_PERCENT", "150")]).unwrap_err();
    assert!(
        err.to_string()
            .contains("DEPENGINE_STORAGE_RESERVE_PERCENT"),
        "{err}"
    );
    // `Some(0)` is no limit.
    let c = StorageBuilder::new().limit_bytes(Some(0)).build().unwrap();
    assert_eq!(c.limit_bytes(), None);
}

#[test]
fn every_power_of_two_bucket_has_its_own_shard() {
    let shards: std::collections::HashSet<usize> = (12..(12 + SHARDS.min(50)))
        .map(|k| super::pool::shard_of(1usize << k))
        .collect();
    assert_eq!(shards.len(), SHARDS.min(50));
    // Page multiples spread over many shards.
    let spread: std::collections::HashSet<usize> =
        (1..=512).map(|p| super::pool::shard_of(p * 4096)).collect();
    assert!(spread.len() > SHARDS / 2, "{} shards used", spread.len());
}

#[test]
fn a_free_to_the_wrong_manager_hands_the_allocation_back() {
    let config = StorageConfig::default();
    let a = config.create(DeviceId::cpu(0));
    let b = config.create(DeviceId::cpu(0));
    let x = a.allocate(100).unwrap();
    let p = x.as_ptr();
    let err = b.free(x).unwrap_err();
    assert!(err.to_string().contains("not made by"), "{err}");
    assert_eq!(err.manager(), DeviceId::cpu(0));
    let x = err.into_allocation();
    assert_eq!(x.as_ptr(), p);
    let x = b.free_direct(x).unwrap_err().into_allocation();
    a.free(x).unwrap();
    assert_eq!(a.stats().cached, 4096);
    assert_eq!(b.stats(), StorageStats::default());
}
