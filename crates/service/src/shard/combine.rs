//! How the parts of an answer combine (the `combine` of each registry entry).

use pir_lattice::{HintHeader, Params, Scheme};

use super::ShardError;
pub use crate::registry::Combine;

impl Combine {
    /// The combined answer of `parts` (one per shard, in shard order); `params` is the whole
    /// database's shape for [`Combine::AddModQ`].
    pub fn answers(self, parts: &[&[u8]], params: Option<&Params>) -> Result<Vec<u8>, ShardError> {
        match (self, params) {
            (Combine::Xor, _) => xor(parts),
            (Combine::AddModQ, Some(params)) => add_answers(params, parts),
            (Combine::AddModQ, None) => Err(ShardError::Combine(
                "adding lattice answers needs the database shape".into(),
            )),
            (Combine::AddThenPack, _) => Err(ShardError::Combine(
                "YPIR parts are added and packed by its front end (shard::YpirFront)".into(),
            )),
            (Combine::NotYet(why), _) => Err(ShardError::Combine(why.into())),
        }
    }
}

/// The XOR of equal-length parts.
pub fn xor(parts: &[&[u8]]) -> Result<Vec<u8>, ShardError> {
    let (first, rest) = parts
        .split_first()
        .ok_or_else(|| ShardError::Combine("no parts".into()))?;
    let mut out = first.to_vec();
    for (k, part) in rest.iter().enumerate() {
        if part.len() != out.len() {
            return Err(ShardError::WrongPart {
                shard: k + 1,
                why: format!("{} bytes, shard 0 sent {}", part.len(), out.len()),
            });
        }
        for (o, b) in out.iter_mut().zip(part.iter()) {
            *o ^= b;
        }
    }
    Ok(out)
}

/// Word-wise sums mod `2^32` (the shards' vectors, each of the whole length).
fn add_words(vectors: Vec<Vec<u32>>) -> Result<Vec<u32>, ShardError> {
    let mut vectors = vectors.into_iter();
    let mut sum = vectors
        .next()
        .ok_or_else(|| ShardError::Combine("no parts".into()))?;
    for (k, words) in vectors.enumerate() {
        if words.len() != sum.len() {
            return Err(ShardError::WrongPart {
                shard: k + 1,
                why: format!("{} words, shard 0 sent {}", words.len(), sum.len()),
            });
        }
        for (s, w) in sum.iter_mut().zip(words) {
            *s = s.wrapping_add(w);
        }
    }
    Ok(sum)
}

/// The sum of SimplePIR answer messages for `params`.
fn add_answers(params: &Params, parts: &[&[u8]]) -> Result<Vec<u8>, ShardError> {
    let words = parts
        .iter()
        .enumerate()
        .map(|(shard, part)| {
            pir_lattice::wire::decode_answer(part, params).map_err(|e| ShardError::WrongPart {
                shard,
                why: e.to_string(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(pir_lattice::wire::encode_answer(
        params.scheme,
        &add_words(words)?,
    ))
}

/// The whole hint message from the shards' hint messages: the same header (the whole
/// database's) in each, the matrices added.
pub fn add_hints(scheme: Scheme, parts: &[&[u8]]) -> Result<(HintHeader, Vec<u8>), ShardError> {
    let mut header = None;
    let mut matrices = Vec::with_capacity(parts.len());
    for (shard, part) in parts.iter().enumerate() {
        let wrong = |why: String| ShardError::WrongPart { shard, why };
        let (found, words) =
            pir_lattice::wire::decode_full_hint(part, scheme).map_err(|e| wrong(e.to_string()))?;
        match header {
            None => header = Some(found),
            Some(first) if first != found => {
                return Err(wrong("its hint is for another database".into()))
            }
            Some(_) => {}
        }
        matrices.push(words);
    }
    let header = header.ok_or_else(|| ShardError::Combine("no parts".into()))?;
    let sum = add_words(matrices)?;
    Ok((header, pir_lattice::wire::encode_hint(&header, &sum)))
}
