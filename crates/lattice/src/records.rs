//! Records as a bit string (least significant bit first, the layout of `pir_core::bits`): cutting
//! them into database entries and putting decoded entries back together.

use pir_core::Error;

use crate::params::{Location, Params};

/// Bits `[start, start + len)` of `bytes` as an integer (`len <= 32`; bits past the end are 0).
pub fn read_bits(bytes: &[u8], start: u64, len: u32) -> u32 {
    let first = (start / 8) as usize;
    let shift = (start % 8) as u32;
    // Eight bytes at once where they exist (the common case), else the bytes left.
    let value = match bytes.get(first..first + 8) {
        Some(eight) => u64::from_le_bytes([
            eight[0], eight[1], eight[2], eight[3], eight[4], eight[5], eight[6], eight[7],
        ]),
        None => {
            let mut buffer = [0u8; 8];
            let tail = bytes.get(first..).unwrap_or(&[]);
            let n = tail.len().min(8);
            buffer[..n].copy_from_slice(&tail[..n]);
            u64::from_le_bytes(buffer)
        }
    };
    ((value >> shift) & ((1u64 << len) - 1)) as u32
}

/// Record `index` of `bytes`, a bit string of `bits`-bit records, as a client's decode returns
/// it (`ceil(bits / 8)` bytes, bits past the end of `bytes` are 0). Bit by bit, independently of
/// [`read_bits`] and [`assemble`], so that tests can check decoding against it.
pub fn record(bytes: &[u8], index: u64, bits: u32) -> Vec<u8> {
    let mut out = vec![0u8; (bits as usize).div_ceil(8)];
    for b in 0..u64::from(bits) {
        let at = index * u64::from(bits) + b;
        if bytes
            .get((at / 8) as usize)
            .is_some_and(|byte| byte >> (at % 8) & 1 == 1)
        {
            out[(b / 8) as usize] |= 1 << (b % 8);
        }
    }
    out
}

/// ORs the low `len` bits of `value` into bits `[start, start + len)` of `out` (`len <= 32`).
fn write_bits(out: &mut [u8], start: u64, value: u32, len: u32) {
    for bit in 0..u64::from(len) {
        if value >> bit & 1 == 1 {
            let at = start + bit;
            if let Some(byte) = out.get_mut((at / 8) as usize) {
                *byte |= 1 << (at % 8);
            }
        }
    }
}

/// The record at `location` from its group's decoded entries (each below `2^b`), or an error
/// if an entry is out of range (a decoding failure or a wrong answer).
pub fn assemble(params: &Params, location: &Location, entries: &[u32]) -> Result<Vec<u8>, Error> {
    let b = params.entry_bits();
    if entries.iter().any(|&e| e >> b != 0) {
        return Err(Error::Malformed(
            "the answer does not decrypt to database entries (wrong answer or wrong hint)".into(),
        ));
    }
    let bits = params.record_bits;
    let mut out = vec![0u8; params.record_bytes()];
    if let [entry] = entries {
        let value = entry >> location.bit_offset;
        write_bits(&mut out, 0, value, bits.min(32));
    } else {
        for (k, &entry) in entries.iter().enumerate() {
            let start = k as u32 * b;
            write_bits(&mut out, u64::from(start), entry, b.min(bits - start));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_round_trip() {
        let bytes = [0b1010_1100u8, 0xff, 0x01];
        assert_eq!(read_bits(&bytes, 2, 4), 0b1011);
        assert_eq!(read_bits(&bytes, 6, 4), 0b1110);
        assert_eq!(read_bits(&bytes, 16, 9), 1);
        assert_eq!(read_bits(&bytes, 20, 9), 0);
        let mut out = [0u8; 3];
        write_bits(&mut out, 6, 0b1110, 4);
        assert_eq!(out, [0b1000_0000, 0b11, 0]);
        // Records of 5 bits: the second is bits 5..10, the fourth 15..20; the sixth lies
        // past the bytes.
        assert_eq!(record(&bytes, 1, 5), [0b11101]);
        assert_eq!(record(&bytes, 3, 5), [0b11]);
        assert_eq!(record(&bytes, 5, 5), [0]);
        assert_eq!(record(&bytes, 0, 12), [0b1010_1100, 0b1111]);
    }
}
