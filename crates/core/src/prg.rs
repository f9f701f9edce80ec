//! The one pinned pseudorandom generator of every `pir` protocol.
//!
//! RAID-PIR (Günther 2019, section 3.2) sends each server a `κ = 128`-bit seed instead of its
//! random sub-queries, QDP derives its server-chosen seeds from it, and the lattice schemes
//! expand their public matrices from a seed (`pir_lattice::prg`). Server and client must
//! expand a seed to the *same* bits, so the generator and its stream layout are part of the
//! wire format.
//!
//! Stream layout (pinned, never change without bumping the wire version):
//!
//! ```text
//! expand(seed) = AES-128_seed(C_0) || AES-128_seed(C_1) || AES-128_seed(C_2) || ...
//! C_i          = i as a 128-bit big-endian integer (C_0 = 16 zero bytes)
//! ```
//!
//! That is AES-128 in CTR mode as in NIST SP 800-38A, section 6.5, with key = seed, initial
//! counter block = 16 zero bytes and the whole 128-bit block incremented big-endian, encrypting
//! zero bytes. `openssl enc -aes-128-ctr -K <seed> -iv 00..00 -nosalt` over zero bytes produces
//! the same stream; `tests/vectors/prg_aes128ctr.txt` holds known answers made that way.
//! A fresh key per query means the counter always starts at zero without ever reusing a
//! (key, counter) pair across queries (seeds are 128 uniformly random bits).
//! [`expand_at`] reads the same stream from a byte offset, so a large expansion (a lattice
//! matrix) can be produced in independent pieces.

use aes::Aes128;
use ctr::cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};

/// Length of a seed in bytes: `κ = 128` bits, the security parameter of RAID-PIR (Günther 2019,
/// section 3.2) and the AES-128 key size.
pub const SEED_LEN: usize = 16;

/// A PRG seed (an AES-128 key).
pub type Seed = [u8; SEED_LEN];

/// AES-128 with a 128-bit big-endian counter (NIST SP 800-38A CTR).
type Aes128Ctr = ctr::Ctr128BE<Aes128>;

/// Fills `out` with the first `out.len()` bytes of the keystream of `seed` (layout in the module
/// documentation). Deterministic: the same seed always gives the same bytes, and a shorter
/// `out` is a prefix of a longer one.
pub fn expand(seed: &Seed, out: &mut [u8]) {
    let counter = [0u8; 16];
    let mut cipher = Aes128Ctr::new(seed.into(), (&counter).into());
    out.fill(0);
    // The keystream of a 128-bit counter is 2^132 bytes long, far beyond any slice, so
    // `apply_keystream` (which panics only past the end of the keystream) cannot panic here.
    cipher.apply_keystream(out);
}

/// Fills `out` with the keystream of `seed` from byte `offset` on: bytes
/// `offset..offset + out.len()` of what [`expand`] would produce.
pub fn expand_at(seed: &Seed, offset: u64, out: &mut [u8]) {
    let mut cipher = Aes128Ctr::new(seed.into(), (&[0u8; 16]).into());
    // The keystream is 2^132 bytes long; a u64 offset plus a slice stays far inside it, so
    // neither `seek` nor `apply_keystream` (which panic only past its end) can panic.
    cipher.seek(offset);
    out.fill(0);
    cipher.apply_keystream(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NIST SP 800-38A, appendix F.5.1 (CTR-AES128.Encrypt): checks that the primitive is
    /// AES-128 with a big-endian 128-bit counter, independently of our zero-counter layout.
    #[test]
    fn nist_sp800_38a_f51_ctr_aes128() {
        let key = hex::decode("2b7e151628aed2a6abf7158809cf4f3c").unwrap();
        let counter = hex::decode("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff").unwrap();
        let mut data = hex::decode(concat!(
            "6bc1bee22e409f96e93d7e117393172a",
            "ae2d8a571e03ac9c9eb76fac45af8e51",
            "30c81c46a35ce411e5fbc1191a0a52ef",
            "f69f2445df4f9b17ad2b417be66c3710",
        ))
        .unwrap();
        let key: [u8; 16] = key.try_into().unwrap();
        let counter: [u8; 16] = counter.try_into().unwrap();
        let mut cipher = Aes128Ctr::new((&key).into(), (&counter).into());
        cipher.apply_keystream(&mut data);
        assert_eq!(
            hex::encode(&data),
            concat!(
                "874d6191b620e3261bef6864990db6ce",
                "9806f66b7970fdff8617187bb9fffdff",
                "5ae4df3edbd5d35e5b4f09020db03eab",
                "1e031dda2fbe03d1792170a0f3009cee",
            )
        );
    }

    #[test]
    fn first_block_of_zero_seed_is_aes_of_zero() {
        // FIPS-197 style check: AES-128 with the all-zero key on the all-zero block.
        let mut out = [0u8; 16];
        expand(&[0; 16], &mut out);
        assert_eq!(hex::encode(out), "66e94bd4ef8a2c3b884cfa59ca342b2e");
    }

    #[test]
    fn shorter_output_is_a_prefix_and_output_ignores_prior_contents() {
        let seed = [9u8; 16];
        let mut long = vec![0xaa; 100];
        expand(&seed, &mut long);
        let mut short = vec![0x55; 37];
        expand(&seed, &mut short);
        assert_eq!(&long[..37], &short[..]);
        let mut other = vec![0u8; 37];
        expand(&[8u8; 16], &mut other);
        assert_ne!(short, other);
    }

    #[test]
    fn expansion_from_an_offset_is_a_slice_of_the_stream() {
        let seed = [3u8; 16];
        let mut all = vec![0u8; 200];
        expand(&seed, &mut all);
        for offset in [0usize, 1, 15, 16, 17, 100] {
            let mut part = vec![0xee; 50];
            expand_at(&seed, offset as u64, &mut part);
            assert_eq!(part, all[offset..offset + 50]);
        }
    }
}
