//! Storage configuration: a builder, and the `DEPENGINE_STORAGE_*`
//! environment variables.
//!
//! | variable | setting | values | default |
//! |---|---|---|---|
//! | `DEPENGINE_STORAGE_POOL_TYPE` | [`pool_type`](StorageBuilder::pool_type) | `naive`, `exact` (or `pooled`), `round`, `unpooled` (any case) | `exact` |
//! | `DEPENGINE_STORAGE_PAGE_SIZE` | [`page_size`](StorageBuilder::page_size) | bytes, e.g. `4096` or `4KiB` | 4 KiB |
//! | `DEPENGINE_STORAGE_ROUND_CUTOFF` | [`round_cutoff`](StorageBuilder::round_cutoff) | a power of two: an exponent below 64 (`20`, as MXNet's `MXNET_GPU_MEM_POOL_ROUND_LINEAR_CUTOFF`) or bytes (`1MiB`) | 2^24 |
//! | `DEPENGINE_STORAGE_RESERVE_PERCENT` | [`reserve_percent`](StorageBuilder::reserve_percent) | 0 to 99 | 5 |
//! | `DEPENGINE_STORAGE_LIMIT_BYTES` | [`limit_bytes`](StorageBuilder::limit_bytes) | bytes; `0` or empty for no limit | no limit |
//!
//! Byte counts take an optional suffix `K`/`KiB`, `M`/`MiB`, `G`/`GiB`
//! (powers of 1024). An unset or empty variable keeps the builder's value.

use crate::sync::Arc;

use super::naive::NaiveStorage;
use super::pool::PooledStorage;
use super::rounding::{Rounding, DEFAULT_LARGE_THRESHOLD, DEFAULT_PAGE_SIZE, DEFAULT_ROUND_CUTOFF};
use super::unpooled::UnpooledStorage;
use super::{BuildError, DeviceId, Storage};

/// Environment variable of [`StorageBuilder::pool_type`].
pub const ENV_POOL_TYPE: &str = "DEPENGINE_STORAGE_POOL_TYPE";
/// Environment variable of [`StorageBuilder::page_size`].
pub const ENV_PAGE_SIZE: &str = "DEPENGINE_STORAGE_PAGE_SIZE";
/// Environment variable of [`StorageBuilder::round_cutoff`].
pub const ENV_ROUND_CUTOFF: &str = "DEPENGINE_STORAGE_ROUND_CUTOFF";
/// Environment variable of [`StorageBuilder::reserve_percent`].
pub const ENV_RESERVE_PERCENT: &str = "DEPENGINE_STORAGE_RESERVE_PERCENT";
/// Environment variable of [`StorageBuilder::limit_bytes`].
pub const ENV_LIMIT_BYTES: &str = "DEPENGINE_STORAGE_LIMIT_BYTES";

/// The smallest alignment a manager gives (cache line and AVX-512 width).
pub const MIN_ALIGNMENT: usize = 64;
/// The default reserve: 5 % of the limit, as MXNet's GPU pool.
pub const DEFAULT_RESERVE_PERCENT: u32 = 5;

/// Which manager serves a context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PoolType {
    /// Aligned system allocation of the size asked; no cache.
    Naive,
    /// Pool reusing blocks of exactly the same rounded size (page multiples,
    /// large-threshold multiples above it).
    #[default]
    Exact,
    /// Pool with power-of-two buckets up to the cutoff, cutoff multiples above.
    Round,
    /// The exact pool's rounding, with every free returned to the system.
    Unpooled,
}

impl PoolType {
    /// The name the environment variable takes.
    pub fn name(self) -> &'static str {
        match self {
            PoolType::Naive => "naive",
            PoolType::Exact => "exact",
            PoolType::Round => "round",
            PoolType::Unpooled => "unpooled",
        }
    }
}

impl std::str::FromStr for PoolType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "naive" => Ok(PoolType::Naive),
            "exact" | "pooled" => Ok(PoolType::Exact),
            "round" => Ok(PoolType::Round),
            "unpooled" => Ok(PoolType::Unpooled),
            _ => Err("expected one of naive, exact (or pooled), round, unpooled".to_owned()),
        }
    }
}

/// A validated storage configuration; makes the manager of a context.
///
/// # Examples
///
/// ```
/// use depengine::storage::{DeviceId, PoolType, StorageConfig};
/// let config = StorageConfig::builder()
///     .pool_type(PoolType::Round)
///     .round_cutoff(1 << 20)
///     .build()?;
/// let storage = config.create(DeviceId::cpu(0));
/// let a = storage.allocate(32)?;
/// assert_eq!(a.rounded_size(), 4096);
/// storage.free(a)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageConfig {
    pool_type: PoolType,
    page_size: usize,
    large_threshold: usize,
    round_cutoff: usize,
    reserve_percent: u32,
    limit_bytes: Option<usize>,
    alignment: usize,
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            pool_type: PoolType::Exact,
            page_size: DEFAULT_PAGE_SIZE,
            large_threshold: DEFAULT_LARGE_THRESHOLD,
            round_cutoff: DEFAULT_ROUND_CUTOFF,
            reserve_percent: DEFAULT_RESERVE_PERCENT,
            limit_bytes: None,
            alignment: MIN_ALIGNMENT,
        }
    }
}

impl StorageConfig {
    /// A builder starting from the defaults.
    pub fn builder() -> StorageBuilder {
        StorageBuilder::default()
    }

    /// The defaults, overridden by the `DEPENGINE_STORAGE_*` variables of the
    /// process environment.
    ///
    /// # Errors
    ///
    /// [`BuildError`] naming the variable whose value is bad.
    pub fn from_env() -> Result<Self, BuildError> {
        StorageBuilder::default().env()?.build()
    }

    /// The manager kind.
    pub fn pool_type(&self) -> PoolType {
        self.pool_type
    }

    /// Page size of the exact pool, smallest block of the round pool.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Above this, the exact pool rounds to multiples of it.
    pub fn large_threshold(&self) -> usize {
        self.large_threshold
    }

    /// The round pool's linear cutoff.
    pub fn round_cutoff(&self) -> usize {
        self.round_cutoff
    }

    /// Percentage of the limit to keep unheld before releasing the cache.
    pub fn reserve_percent(&self) -> u32 {
        self.reserve_percent
    }

    /// Most bytes a manager may hold (in use plus cached), if limited.
    pub fn limit_bytes(&self) -> Option<usize> {
        self.limit_bytes
    }

    /// Alignment of every block.
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// The rounding of this configuration's manager kind.
    pub fn rounding(&self) -> Rounding {
        self.rounding_of(self.pool_type)
    }

    /// The rounding a manager of `kind` would use with these settings.
    pub fn rounding_of(&self, kind: PoolType) -> Rounding {
        match kind {
            PoolType::Naive => Rounding::None,
            PoolType::Exact | PoolType::Unpooled => Rounding::Exact {
                page: self.page_size,
                large_threshold: self.large_threshold,
            },
            PoolType::Round => Rounding::Round {
                page: self.page_size,
                cutoff: self.round_cutoff,
            },
        }
    }

    /// A new manager for `ctx`, of this configuration's kind.
    pub fn create(&self, ctx: DeviceId) -> Arc<dyn Storage> {
        match self.pool_type {
            PoolType::Naive => Arc::new(NaiveStorage::new(ctx, self)),
            PoolType::Exact => Arc::new(PooledStorage::exact(ctx, self)),
            PoolType::Round => Arc::new(PooledStorage::round(ctx, self)),
            PoolType::Unpooled => Arc::new(UnpooledStorage::new(ctx, self)),
        }
    }
}

/// Builds a [`StorageConfig`].
///
/// Settings left unset keep their defaults; [`env`](Self::env) and
/// [`env_from`](Self::env_from) apply the `DEPENGINE_STORAGE_*` variables on
/// top of what was set before them, so call them first to let the code win,
/// last to let the environment win.
#[derive(Debug, Clone, Default)]
pub struct StorageBuilder {
    config: StorageConfig,
}

impl StorageBuilder {
    /// A builder starting from the defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The manager kind (default [`PoolType::Exact`]).
    pub fn pool_type(mut self, kind: PoolType) -> Self {
        self.config.pool_type = kind;
        self
    }

    /// Page size (default 4 KiB; must be a power of two, at least the
    /// alignment).
    pub fn page_size(mut self, bytes: usize) -> Self {
        self.config.page_size = bytes;
        self
    }

    /// The exact pool's large-size threshold (default 2 MiB; a multiple of
    /// the page size).
    pub fn large_threshold(mut self, bytes: usize) -> Self {
        self.config.large_threshold = bytes;
        self
    }

    /// The round pool's linear cutoff (default 2^24; a power of two, at least
    /// the page size).
    pub fn round_cutoff(mut self, bytes: usize) -> Self {
        self.config.round_cutoff = bytes;
        self
    }

    /// Percentage of the limit kept free before the cache is released
    /// (default 5; below 100). No effect without a limit.
    pub fn reserve_percent(mut self, percent: u32) -> Self {
        self.config.reserve_percent = percent;
        self
    }

    /// Most bytes a manager may hold, in use plus cached (`None`, the
    /// default, or `Some(0)`: no limit).
    pub fn limit_bytes(mut self, limit: Option<usize>) -> Self {
        self.config.limit_bytes = limit.filter(|&l| l > 0);
        self
    }

    /// Alignment of every block (default 64; a power of two from 64 up to the
    /// page size).
    pub fn alignment(mut self, bytes: usize) -> Self {
        self.config.alignment = bytes;
        self
    }

    /// Applies the `DEPENGINE_STORAGE_*` variables of the process
    /// environment.
    ///
    /// # Errors
    ///
    /// [`BuildError::BadVariable`] naming the variable whose value cannot be
    /// parsed (a variable that is not valid Unicode counts as such).
    pub fn env(self) -> Result<Self, BuildError> {
        self.env_from(|var| match std::env::var(var) {
            Ok(v) => Some(v),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(v)) => Some(v.to_string_lossy().into_owned()),
        })
    }

    /// Applies `DEPENGINE_STORAGE_*` variables read through `lookup`, which
    /// returns a variable's value or `None` when it is unset. Tests pass a
    /// map here instead of touching the process environment.
    ///
    /// # Errors
    ///
    /// [`BuildError::BadVariable`] naming the variable whose value cannot be
    /// parsed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use depengine::storage::{PoolType, StorageBuilder};
    /// let vars = HashMap::from([
    ///     ("DEPENGINE_STORAGE_POOL_TYPE", "Round"),
    ///     ("DEPENGINE_STORAGE_ROUND_CUTOFF", "20"),
    /// ]);
    /// let config = StorageBuilder::new()
    ///     .env_from(|v| vars.get(v).map(|s| s.to_string()))?
    ///     .build()?;
    /// assert_eq!(config.pool_type(), PoolType::Round);
    /// assert_eq!(config.round_cutoff(), 1 << 20);
    /// # Ok::<(), depengine::storage::BuildError>(())
    /// ```
    pub fn env_from(
        mut self,
        mut lookup: impl FnMut(&str) -> Option<String>,
    ) -> Result<Self, BuildError> {
        let mut get = |var: &'static str| lookup(var).filter(|v| !v.trim().is_empty());
        if let Some(v) = get(ENV_POOL_TYPE) {
            self.config.pool_type = v.parse().map_err(|reason| bad(ENV_POOL_TYPE, &v, reason))?;
        }
        if let Some(v) = get(ENV_PAGE_SIZE) {
            self.config.page_size = parse_bytes(&v).map_err(|r| bad(ENV_PAGE_SIZE, &v, r))?;
        }
        if let Some(v) = get(ENV_ROUND_CUTOFF) {
            self.config.round_cutoff =
                parse_cutoff(&v).map_err(|r| bad(ENV_ROUND_CUTOFF, &v, r))?;
        }
        if let Some(v) = get(ENV_RESERVE_PERCENT) {
            self.config.reserve_percent = v.trim().parse::<u32>().map_err(|_| {
                bad(
                    ENV_RESERVE_PERCENT,
                    &v,
                    "expected a whole percentage, 0 to 99".into(),
                )
            })?;
        }
        if let Some(v) = get(ENV_LIMIT_BYTES) {
            let limit = parse_bytes(&v).map_err(|r| bad(ENV_LIMIT_BYTES, &v, r))?;
            self.config.limit_bytes = Some(limit).filter(|&l| l > 0);
        }
        Ok(self)
    }

    /// Checks the settings and returns the configuration.
    ///
    /// # Errors
    ///
    /// [`BuildError::Invalid`] naming the setting (and its variable) that is
    /// out of range.
    pub fn build(self) -> Result<StorageConfig, BuildError> {
        let c = self.config;
        if !c.alignment.is_power_of_two() || c.alignment < MIN_ALIGNMENT {
            return Err(invalid(
                "alignment",
                None,
                format!(
                    "{} is not a power of two of at least {MIN_ALIGNMENT}",
                    c.alignment
                ),
            ));
        }
        if !c.page_size.is_power_of_two() || c.page_size < c.alignment {
            return Err(invalid(
                "page_size",
                Some(ENV_PAGE_SIZE),
                format!(
                    "{} is not a power of two of at least the alignment ({})",
                    c.page_size, c.alignment
                ),
            ));
        }
        if c.large_threshold < c.page_size || c.large_threshold % c.page_size != 0 {
            return Err(invalid(
                "large_threshold",
                None,
                format!(
                    "{} is not a positive multiple of the page size ({})",
                    c.large_threshold, c.page_size
                ),
            ));
        }
        if !c.round_cutoff.is_power_of_two() || c.round_cutoff < c.page_size {
            return Err(invalid(
                "round_cutoff",
                Some(ENV_ROUND_CUTOFF),
                format!(
                    "{} is not a power of two of at least the page size ({})",
                    c.round_cutoff, c.page_size
                ),
            ));
        }
        if c.reserve_percent >= 100 {
            return Err(invalid(
                "reserve_percent",
                Some(ENV_RESERVE_PERCENT),
                format!("{} is not a percentage below 100", c.reserve_percent),
            ));
        }
        if let Some(limit) = c.limit_bytes {
            if limit < c.page_size {
                return Err(invalid(
                    "limit_bytes",
                    Some(ENV_LIMIT_BYTES),
                    format!(
                        "{limit} is smaller than one page ({}); use 0 for no limit",
                        c.page_size
                    ),
                ));
            }
        }
        Ok(c)
    }
}

fn bad(var: &'static str, value: &str, reason: String) -> BuildError {
    BuildError::BadVariable {
        var,
        value: value.to_owned(),
        reason,
    }
}

fn invalid(setting: &'static str, var: Option<&'static str>, reason: String) -> BuildError {
    BuildError::Invalid {
        setting,
        var,
        reason,
    }
}

/// `4096`, `4K`, `4KiB`, `2M`, `1GiB` (case-insensitive, powers of 1024).
pub(crate) fn parse_bytes(value: &str) -> Result<usize, String> {
    let v = value.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (digits, suffix) = v.split_at(split);
    let expected = || "expected a byte count such as 4096, 4KiB, 16MiB or 2GiB".to_owned();
    let n: usize = digits.parse().map_err(|_| expected())?;
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(expected()),
    };
    n.checked_mul(1usize << shift)
        .ok_or_else(|| format!("{v} bytes does not fit in this machine's address space"))
}

/// A power-of-two cutoff: an exponent below 64, or a byte count.
pub(crate) fn parse_cutoff(value: &str) -> Result<usize, String> {
    let bytes = parse_bytes(value)?;
    let bytes = if bytes < 64 && value.trim().chars().all(|c| c.is_ascii_digit()) {
        1usize
            .checked_shl(bytes as u32)
            .filter(|_| bytes < usize::BITS as usize)
            .ok_or_else(|| format!("2^{bytes} does not fit in this machine's address space"))?
    } else {
        bytes
    };
    if bytes.is_power_of_two() {
        Ok(bytes)
    } else {
        Err(format!(
            "{bytes} is not a power of two (give an exponent such as 24, or bytes such as 16MiB)"
        ))
    }
}
