//! The LWE error distribution and secrets.
//!
//! Errors are *rounded Gaussians*: `round(y)` for `y ~ N(0, σ²)`, `σ =` [`SIGMA`] (Henzinger et
//! al. 2023, section 4.2), so `Pr[x = k] = Φ((k + ½)/σ) - Φ((k - ½)/σ)`. The sampler inverts a
//! table of the cumulative distribution in 64-bit fixed point: one uniform `u64` per sample,
//! compared with every threshold (no data-dependent branches or early exits, so the time taken
//! does not depend on the value drawn). Values are cut at `±`[`TAIL`]` = ±10σ`, beyond which the
//! mass is below `2^-70`; the table is computed with Simpson's rule in `f64` (relative error far
//! below `2^-50`). Secrets are uniform in `Z_q^n` (`q = 2^32`), as in SimplePIR.

use rand::CryptoRng;

use crate::params::SIGMA;

/// Largest magnitude the sampler returns: `10σ`, rounded up.
pub const TAIL: i32 = 64;

const THRESHOLDS: usize = 2 * TAIL as usize;

/// Samples rounded Gaussian errors from a caller-supplied CSPRNG.
#[derive(Debug, Clone)]
pub struct ErrorSampler {
    /// `thresholds[i] = 2^64 · Pr[x <= i - TAIL]` for `i < 2 TAIL`.
    thresholds: [u64; THRESHOLDS],
}

impl Default for ErrorSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl ErrorSampler {
    /// Builds the table (about 8 000 evaluations of `exp`; build once, sample many times).
    pub fn new() -> Self {
        // Left tail mass Pr[x <= k] for k < 0, summed from the far tail inwards (small
        // terms first); the right half follows by symmetry, Pr[x <= k] = 1 - Pr[x <= -k-1].
        let mut left = [0f64; TAIL as usize + 1];
        let mut mass = normal_mass(f64::NEG_INFINITY, -TAIL as f64 - 0.5);
        for k in -TAIL..=0 {
            mass += normal_mass(k as f64 - 0.5, k as f64 + 0.5);
            left[(k + TAIL) as usize] = mass; // Pr[x <= k]
        }
        let scale = 18_446_744_073_709_551_616.0; // 2^64
        let mut thresholds = [0u64; THRESHOLDS];
        for (i, t) in thresholds.iter_mut().enumerate() {
            let k = i as i32 - TAIL;
            *t = if k < 0 {
                (left[(k + TAIL) as usize] * scale) as u64
            } else {
                u64::MAX - (left[(-k - 1 + TAIL) as usize] * scale) as u64
            };
        }
        ErrorSampler { thresholds }
    }

    /// The sampler the clients share: the table is the same for every client, so it is built
    /// once, on first use.
    pub fn shared() -> &'static ErrorSampler {
        static SHARED: std::sync::LazyLock<ErrorSampler> =
            std::sync::LazyLock::new(ErrorSampler::new);
        &SHARED
    }

    /// One error value in `[-TAIL, TAIL]`.
    pub fn sample(&self, rng: &mut impl CryptoRng) -> i32 {
        let u = rng.next_u64();
        let above = self
            .thresholds
            .iter()
            .fold(0i32, |count, &t| count + i32::from(u >= t));
        above - TAIL
    }

    /// One error value as an element of `Z_q` (two's complement).
    pub fn sample_mod_q(&self, rng: &mut impl CryptoRng) -> u32 {
        self.sample(rng) as u32
    }
}

/// A uniform secret in `Z_q^n`.
pub fn uniform_secret(n: usize, rng: &mut impl CryptoRng) -> Vec<u32> {
    (0..n).map(|_| rng.next_u32()).collect()
}

/// `Pr[a <= y < b]` for `y ~ N(0, σ²)`, by Simpson's rule (the tail piece from -inf is cut at
/// 14σ further out, where the density is below 2^-140).
fn normal_mass(a: f64, b: f64) -> f64 {
    let a = if a.is_finite() { a } else { b - 14.0 * SIGMA };
    let density = |y: f64| {
        (-(y * y) / (2.0 * SIGMA * SIGMA)).exp() / (SIGMA * (2.0 * std::f64::consts::PI).sqrt())
    };
    let steps = 64;
    let h = (b - a) / steps as f64;
    let mut sum = density(a) + density(b);
    for i in 1..steps {
        let weight = if i % 2 == 1 { 4.0 } else { 2.0 };
        sum += weight * density(a + i as f64 * h);
    }
    sum * h / 3.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn table_is_a_distribution() {
        let s = ErrorSampler::new();
        assert!(s.thresholds.windows(2).all(|w| w[0] <= w[1]));
        // Pr[x <= -1] = Pr[x >= 1] = (1 - Pr[x = 0]) / 2, Pr[x = 0] ≈ 0.0622 for σ = 6.4.
        let p0 = normal_mass(-0.5, 0.5);
        assert!((p0 - 0.06222).abs() < 1e-4, "{p0}");
        let below_zero = s.thresholds[TAIL as usize - 1] as f64 / 2f64.powi(64);
        assert!((below_zero - (1.0 - p0) / 2.0).abs() < 1e-12);
    }

    #[test]
    fn samples_have_the_right_moments() {
        let s = ErrorSampler::new();
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let n = 200_000;
        let xs: Vec<i32> = (0..n).map(|_| s.sample(&mut rng)).collect();
        let mean = xs.iter().map(|&x| f64::from(x)).sum::<f64>() / n as f64;
        let var = xs.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>() / n as f64;
        // variance of a rounded Gaussian: σ² + 1/12 = 41.04; standard error of the sample
        // variance ≈ sqrt(2/n) σ² ≈ 0.13
        assert!(mean.abs() < 0.1, "{mean}");
        assert!((var - 41.04).abs() < 0.6, "{var}");
        assert!(xs.iter().all(|x| x.abs() <= TAIL));
        assert!(xs.iter().any(|&x| x > 12) && xs.iter().any(|&x| x < -12));
        let zeros = xs.iter().filter(|&&x| x == 0).count() as f64 / n as f64;
        assert!((zeros - 0.0622).abs() < 0.003, "{zeros}");
    }
}
