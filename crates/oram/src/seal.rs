//! Sealing slots and the client state with AES-256-GCM (`ring`).
//!
//! Slot nonce (12 bytes, stored in front of the ciphertext): `session` (u32 LE) then a
//! per-session counter (u64 LE). The session number is made durable before a session writes
//! anything, so a nonce never repeats under one key, even after a crash.
//!
//! Slot associated data binds the ciphertext to its place and time:
//! `"pir-oram slot v1"` ‖ instance id (16 bytes) ‖ partition (u32 LE) ‖ level (u8) ‖ region (u8)
//! ‖ slot (u32 LE) ‖ epoch (u64 LE). The epoch is unique per level rebuild and is kept in the
//! client state, so a store that swaps two slots, moves a slot between levels or partitions,
//! or serves an older copy of a level fails authentication.

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};

use crate::error::OramError;

/// Key length (AES-256).
pub const KEY_LEN: usize = 32;
/// Tag length.
pub const TAG_LEN: usize = 16;
const SLOT_LABEL: &[u8; 16] = b"pir-oram slot v1";

/// Where a slot lives and which rebuild wrote it: the associated data of its seal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotPlace {
    /// Partition.
    pub partition: u32,
    /// Level.
    pub level: u8,
    /// Region (0 or 1).
    pub region: u8,
    /// Slot index in the level.
    pub slot: u32,
    /// Epoch of the level rebuild that wrote it.
    pub epoch: u64,
}

/// Seals and opens slots for one ORAM instance in one session.
pub struct Sealer {
    key: LessSafeKey,
    instance: [u8; 16],
    session: u32,
    counter: u64,
}

impl Sealer {
    /// A sealer for `session` (which must be durable and never reused with this key).
    pub fn new(key: &[u8; KEY_LEN], instance: [u8; 16], session: u32) -> Result<Sealer, OramError> {
        let unbound = UnboundKey::new(&AES_256_GCM, key)
            .map_err(|_| OramError::Internal("AES-256 key of the wrong length"))?;
        Ok(Sealer {
            key: LessSafeKey::new(unbound),
            instance,
            session,
            counter: 0,
        })
    }

    fn aad(&self, place: SlotPlace) -> [u8; 50] {
        let mut aad = [0u8; 50];
        aad[..16].copy_from_slice(SLOT_LABEL);
        aad[16..32].copy_from_slice(&self.instance);
        aad[32..36].copy_from_slice(&place.partition.to_le_bytes());
        aad[36] = place.level;
        aad[37] = place.region;
        aad[38..42].copy_from_slice(&place.slot.to_le_bytes());
        aad[42..].copy_from_slice(&place.epoch.to_le_bytes());
        aad
    }

    /// Seals `plain` (one block) into `out` (`NONCE_LEN + plain.len() + TAG_LEN` bytes).
    pub fn seal(
        &mut self,
        place: SlotPlace,
        plain: &[u8],
        out: &mut [u8],
    ) -> Result<(), OramError> {
        if out.len() != NONCE_LEN + plain.len() + TAG_LEN {
            return Err(OramError::Internal("sealed slot buffer of the wrong size"));
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce[..4].copy_from_slice(&self.session.to_le_bytes());
        nonce[4..].copy_from_slice(&self.counter.to_le_bytes());
        self.counter = self
            .counter
            .checked_add(1)
            .ok_or(OramError::Internal("nonce counter exhausted"))?;
        let (head, rest) = out.split_at_mut(NONCE_LEN);
        head.copy_from_slice(&nonce);
        let (body, tag_out) = rest.split_at_mut(plain.len());
        body.copy_from_slice(plain);
        let tag = self
            .key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(self.aad(place)),
                body,
            )
            .map_err(|_| OramError::Internal("AES-GCM seal failed"))?;
        tag_out.copy_from_slice(tag.as_ref());
        Ok(())
    }

    /// Opens a sealed slot in place; returns the plaintext block, or `None` if it fails
    /// authentication for `place`.
    pub fn open<'a>(&self, place: SlotPlace, sealed: &'a mut [u8]) -> Option<&'a [u8]> {
        if sealed.len() < NONCE_LEN + TAG_LEN {
            return None;
        }
        let (head, rest) = sealed.split_at_mut(NONCE_LEN);
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(head);
        let plain = self
            .key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(self.aad(place)),
                rest,
            )
            .ok()?;
        Some(plain)
    }
}

/// Seals `plain` as a whole (the client state file) with a random nonce from `nonce`.
pub fn seal_blob(
    key: &[u8; KEY_LEN],
    nonce: [u8; NONCE_LEN],
    label: &[u8],
    plain: &[u8],
) -> Result<Vec<u8>, OramError> {
    let unbound = UnboundKey::new(&AES_256_GCM, key)
        .map_err(|_| OramError::Internal("AES-256 key of the wrong length"))?;
    let key = LessSafeKey::new(unbound);
    let mut out = Vec::with_capacity(NONCE_LEN + plain.len() + TAG_LEN);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(plain);
    let tag = key
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(label),
            &mut out[NONCE_LEN..],
        )
        .map_err(|_| OramError::Internal("AES-GCM seal failed"))?;
    out.extend_from_slice(tag.as_ref());
    Ok(out)
}

/// Opens what [`seal_blob`] sealed.
pub fn open_blob(
    key: &[u8; KEY_LEN],
    label: &[u8],
    mut sealed: Vec<u8>,
) -> Result<Vec<u8>, OramError> {
    if sealed.len() < NONCE_LEN + TAG_LEN {
        return Err(OramError::State("the state file is too short".into()));
    }
    let unbound = UnboundKey::new(&AES_256_GCM, key)
        .map_err(|_| OramError::Internal("AES-256 key of the wrong length"))?;
    let key = LessSafeKey::new(unbound);
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&sealed[..NONCE_LEN]);
    let plain_len = key
        .open_in_place(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(label),
            &mut sealed[NONCE_LEN..],
        )
        .map_err(|_| {
            OramError::State(
                "the state does not open with this key (wrong key file, or the state was changed)"
                    .into(),
            )
        })?
        .len();
    sealed.copy_within(NONCE_LEN..NONCE_LEN + plain_len, 0);
    sealed.truncate(plain_len);
    Ok(sealed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn place(slot: u32, epoch: u64) -> SlotPlace {
        SlotPlace {
            partition: 3,
            level: 2,
            region: 1,
            slot,
            epoch,
        }
    }

    #[test]
    fn slots_open_only_at_their_place_and_epoch() {
        let key = [7u8; KEY_LEN];
        let mut sealer = Sealer::new(&key, [1; 16], 5).unwrap();
        let block = vec![0xabu8; 512];
        let mut out = vec![0u8; 512 + 28];
        sealer.seal(place(4, 9), &block, &mut out).unwrap();
        assert_eq!(&out[..4], &5u32.to_le_bytes());
        assert_eq!(
            sealer.open(place(4, 9), &mut out.clone()).unwrap(),
            &block[..]
        );
        assert!(
            sealer.open(place(5, 9), &mut out.clone()).is_none(),
            "swapped slot"
        );
        assert!(
            sealer.open(place(4, 8), &mut out.clone()).is_none(),
            "older epoch"
        );
        let other = Sealer::new(&key, [2; 16], 5).unwrap();
        assert!(
            other.open(place(4, 9), &mut out.clone()).is_none(),
            "other instance"
        );
        let mut flipped = out.clone();
        flipped[100] ^= 1;
        assert!(
            sealer.open(place(4, 9), &mut flipped).is_none(),
            "flipped bit"
        );
        // Nonces never repeat within a session.
        let mut second = vec![0u8; 512 + 28];
        sealer.seal(place(4, 9), &block, &mut second).unwrap();
        assert_ne!(&out[..12], &second[..12]);
    }

    #[test]
    fn blobs_round_trip_and_refuse_other_keys() {
        let sealed = seal_blob(&[1; 32], [9; 12], b"label", b"hello").unwrap();
        assert_eq!(
            open_blob(&[1; 32], b"label", sealed.clone()).unwrap(),
            b"hello"
        );
        assert!(open_blob(&[2; 32], b"label", sealed.clone()).is_err());
        assert!(open_blob(&[1; 32], b"other", sealed).is_err());
        assert!(open_blob(&[1; 32], b"label", vec![0; 5]).is_err());
    }
}
