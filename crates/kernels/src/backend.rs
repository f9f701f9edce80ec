//! Which SIMD backend the kernels use, chosen once at run time.
//!
//! Every kernel has a portable implementation (the reference, plain Rust that the compiler
//! vectorises for the baseline target) and, on x86-64, AVX2 and AVX-512 versions compiled with
//! `#[target_feature]` and called only after `is_x86_feature_detected!` says the CPU has them.
//! No `-C target-cpu=native` is needed. `PIR_KERNEL=portable|avx2|avx512` (or
//! [`Backend::force`]) overrides the choice, for comparisons and tests; asking for a backend
//! the CPU lacks falls back to the best one it has.

use std::sync::atomic::{AtomicU8, Ordering};

/// A kernel implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Plain Rust; the reference every other backend is tested against.
    Portable,
    /// 256-bit AVX2 (x86-64).
    Avx2,
    /// 512-bit AVX-512 F+BW (x86-64).
    Avx512,
}

const UNSET: u8 = u8::MAX;
static CHOSEN: AtomicU8 = AtomicU8::new(UNSET);

impl Backend {
    /// Every backend, best last.
    pub const ALL: [Backend; 3] = [Backend::Portable, Backend::Avx2, Backend::Avx512];

    /// Its name as `PIR_KERNEL` and `pir bench` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Portable => "portable",
            Backend::Avx2 => "avx2",
            Backend::Avx512 => "avx512",
        }
    }

    /// Parses a name as [`Backend::name`] writes it.
    pub fn from_name(name: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name() == name)
    }

    /// Whether this CPU can run it.
    pub fn is_available(self) -> bool {
        match self {
            Backend::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The backends this CPU can run, best last.
    pub fn available() -> Vec<Backend> {
        Backend::ALL
            .into_iter()
            .filter(|b| b.is_available())
            .collect()
    }

    /// The best backend this CPU has.
    pub fn best() -> Backend {
        Backend::available()
            .last()
            .copied()
            .unwrap_or(Backend::Portable)
    }

    /// The backend the kernels use: `PIR_KERNEL` if set and available, else [`Backend::best`].
    pub fn current() -> Backend {
        let code = CHOSEN.load(Ordering::Relaxed);
        if code != UNSET {
            return Backend::ALL[usize::from(code)];
        }
        let chosen = std::env::var("PIR_KERNEL")
            .ok()
            .and_then(|name| Backend::from_name(&name))
            .filter(|b| b.is_available())
            .unwrap_or_else(Backend::best);
        CHOSEN.store(chosen as u8, Ordering::Relaxed);
        chosen
    }

    /// Makes every later kernel call use `self` (or the best available one if the CPU lacks
    /// it); returns the backend actually in force.
    pub fn force(self) -> Backend {
        let chosen = if self.is_available() {
            self
        } else {
            Backend::best()
        };
        CHOSEN.store(chosen as u8, Ordering::Relaxed);
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_portable_is_always_there() {
        for b in Backend::ALL {
            assert_eq!(Backend::from_name(b.name()), Some(b));
        }
        assert_eq!(Backend::from_name("sse9"), None);
        assert!(Backend::available().contains(&Backend::Portable));
        assert!(Backend::best().is_available());
    }
}
