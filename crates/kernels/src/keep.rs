//! Keeping, for each index of a block, the two smallest distinct keys it was given: the last
//! step of Checklist's client preprocessing (`pir_xor::checklist`'s pointer builder), which
//! applies about 28 (index, key) pairs per index, each at a random index of an L2-sized block.
//!
//! A pair is one `u32`: the index's offset in the block (the low `shift` bits), a *wrap* bit
//! (bit `shift`) and a key offset (the bits above), standing for
//!
//! ```text
//! index = pair mod 2^shift        key = epoch + (pair >> (shift + 1)) + (wrap ? m : 0)
//! ```
//!
//! and an entry `[k1, k2]` (`k1 <= k2`) keeps the two smallest distinct keys: `k1' = min(k1,
//! key)` and `k2' = min(k2, max(k1, key))`, except that a key equal to `k1` leaves `k2`. The
//! rule does not depend on the order of the pairs, so any order gives the same entries.
//!
//! The scalar loop is latency-bound (a load, a compare and a store per pair, at a random
//! entry). AVX-512 takes 16 pairs at a time: their entries gathered as 64-bit words, the rule
//! applied lane by lane, the entries scattered back. Two pairs of one group naming the same
//! entry would each read the old entry and the later write would drop the earlier key, so a
//! group with a repeated index (AVX-512 CD's conflict detection; about one group in 64 at
//! 2^14 entries) is applied one pair at a time instead. AVX2 has gathers but no scatters or
//! conflict detection and runs the scalar loop.

use crate::Backend;

/// The rule for one pair.
#[inline(always)]
pub fn keep_two(entry: &mut [u32; 2], key: u32) {
    let [k1, k2] = *entry;
    // All ones when the key repeats `k1`: the maximum becomes all ones and `k2` stays.
    let repeated = 0u32.wrapping_sub(u32::from(key == k1));
    *entry = [k1.min(key), k2.min(k1.max(key) | repeated)];
}

/// The key a pair stands for (see the module).
#[inline(always)]
fn key_of(pair: u32, shift: u32, epoch: u32, m: u32) -> u32 {
    let wrap = m & 0u32.wrapping_sub(pair >> shift & 1);
    epoch.wrapping_add(pair >> (shift + 1)).wrapping_add(wrap)
}

fn apply_scalar(entries: &mut [[u32; 2]], shift: u32, epoch: u32, m: u32, pairs: &[u32]) {
    let mask = (1u32 << shift) - 1;
    for &pair in pairs {
        // The offset is below 2^shift = entries.len() (checked by the caller).
        keep_two(
            &mut entries[(pair & mask) as usize],
            key_of(pair, shift, epoch, m),
        );
    }
}

/// Applies every pair of `pairs` to `entries` (`2^shift` of them, `1 <= shift <= 30`). Panics
/// if `entries.len() != 2^shift`.
pub fn apply_pairs(
    backend: Backend,
    entries: &mut [[u32; 2]],
    shift: u32,
    epoch: u32,
    m: u32,
    pairs: &[u32],
) {
    assert!(
        (1..=30).contains(&shift) && entries.len() == 1 << shift,
        "2^shift entries, shift from 1 to 30"
    );
    #[cfg(target_arch = "x86_64")]
    if backend == Backend::Avx512
        && Backend::Avx512.is_available()
        && std::arch::is_x86_feature_detected!("avx512cd")
    {
        // SAFETY: the CPU has AVX-512 F and CD (checked above), and `entries` holds 2^shift
        // entries (asserted above).
        unsafe { x86::apply_avx512(entries, shift, epoch, m, pairs) };
        return;
    }
    let _ = backend;
    apply_scalar(entries, shift, epoch, m, pairs);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// # Safety
    /// The CPU must support AVX-512 F and CD, and `entries.len()` must be `2^shift`.
    #[target_feature(enable = "avx512f,avx512cd")]
    pub(super) unsafe fn apply_avx512(
        entries: &mut [[u32; 2]],
        shift: u32,
        epoch: u32,
        m: u32,
        pairs: &[u32],
    ) {
        let base: *mut i64 = entries.as_mut_ptr().cast();
        let mask = _mm512_set1_epi32(((1u32 << shift) - 1) as i32);
        let epoch_v = _mm512_set1_epi32(epoch as i32);
        let m_v = _mm512_set1_epi32(m as i32);
        let one = _mm512_set1_epi32(1);
        let low = _mm512_set1_epi64(0xffff_ffff);
        let by_shift = _mm_cvtsi32_si128(shift as i32);
        let by_key = _mm_cvtsi32_si128(shift as i32 + 1);
        let groups = pairs.chunks_exact(16);
        let rest = groups.remainder();
        for group in groups {
            // SAFETY: `group` holds 16 u32 (an unaligned load).
            let p = unsafe { _mm512_loadu_si512(group.as_ptr().cast()) };
            let index = _mm512_and_si512(p, mask);
            let conflicts = _mm512_conflict_epi32(index);
            if _mm512_test_epi32_mask(conflicts, conflicts) != 0 {
                super::apply_scalar(entries, shift, epoch, m, group);
                continue;
            }
            let wrap = _mm512_sub_epi32(
                _mm512_setzero_si512(),
                _mm512_and_si512(_mm512_srl_epi32(p, by_shift), one),
            );
            let key = _mm512_add_epi32(
                _mm512_add_epi32(epoch_v, _mm512_srl_epi32(p, by_key)),
                _mm512_and_si512(wrap, m_v),
            );
            for half in [
                (_mm512_castsi512_si256(index), _mm512_castsi512_si256(key)),
                (
                    _mm512_extracti64x4_epi64::<1>(index),
                    _mm512_extracti64x4_epi64::<1>(key),
                ),
            ] {
                let (at, key) = half;
                let key = _mm512_cvtepu32_epi64(key);
                // SAFETY: every offset is below 2^shift = entries.len() (masked), and an entry
                // is 8 bytes (scale 8).
                let old = unsafe { _mm512_i32gather_epi64::<8>(at, base) };
                let k1 = _mm512_and_si512(old, low);
                let k2 = _mm512_srli_epi64::<32>(old);
                let repeated = _mm512_cmpeq_epu64_mask(key, k1);
                let first = _mm512_min_epu64(k1, key);
                let second = _mm512_mask_mov_epi64(
                    _mm512_min_epu64(k2, _mm512_max_epu64(k1, key)),
                    repeated,
                    k2,
                );
                let new = _mm512_or_si512(first, _mm512_slli_epi64::<32>(second));
                // SAFETY: as for the gather; no two lanes of the group name one entry.
                unsafe { _mm512_i32scatter_epi64::<8>(base, at, new) };
            }
        }
        super::apply_scalar(entries, shift, epoch, m, rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every backend keeps what the branching rule keeps, over random pairs with many repeated
    /// indices (small blocks) and keys (small key ranges), with and without wrap bits.
    #[test]
    fn every_backend_equals_the_branching_rule() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u32
        };
        for shift in [1u32, 3, 6, 14] {
            for key_bits in [2u32, 6, 31 - shift] {
                let pairs: Vec<u32> = (0..5000)
                    .map(|_| {
                        let offset = next() & ((1 << shift) - 1);
                        let wrap = next() & 1;
                        let key = next() & ((1 << key_bits) - 1);
                        key << (shift + 1) | wrap << shift | offset
                    })
                    .collect();
                let (epoch, m) = (next() >> 4, 1 << key_bits);
                let start: Vec<[u32; 2]> = (0..1usize << shift)
                    .map(|i| {
                        if i % 3 == 0 {
                            [2 * m + epoch; 2]
                        } else {
                            [epoch + 5, epoch + 9]
                        }
                    })
                    .collect();
                let mut expected = start.clone();
                for &pair in &pairs {
                    let key = key_of(pair, shift, epoch, m);
                    let entry = &mut expected[(pair & ((1 << shift) - 1)) as usize];
                    let [k1, k2] = *entry;
                    if key < k1 {
                        *entry = [key, k1];
                    } else if key != k1 && key < k2 {
                        entry[1] = key;
                    }
                }
                for backend in Backend::available() {
                    let mut entries = start.clone();
                    apply_pairs(backend, &mut entries, shift, epoch, m, &pairs);
                    assert_eq!(
                        entries, expected,
                        "{backend:?} shift {shift} keys {key_bits}"
                    );
                }
            }
        }
    }
}
