//! DoublePIR (Henzinger et al., USENIX Security 2023, section 5): SimplePIR, then a second
//! LWE layer over the first answer and over the hint, so the client's hint no longer grows
//! with the database.
//!
//! Public matrices `A1 ∈ Z_q^{m×n}` and `A2 ∈ Z_q^{ℓ×n}` (two seeds). `Decomp(x)` writes each
//! element of `Z_q` as its `κ` base-`p` digits (`p^κ >= q`), so a `Z_q` matrix becomes a `Z_p`
//! matrix `κ` times taller; `'` is the centering of [`crate::lwe`].
//!
//! - Setup: `H1 = D'A1 ∈ Z_q^{ℓ×n}`; the server keeps `M = Decomp(H1ᵀ) ∈ Z_p^{κn×ℓ}` (row
//!   `c κ + k` holds digit `k` of column `c` of `H1`) and publishes the hint `H2 = M'A2`
//!   (`κn × n`: 16 MiB at `κ = 4`, whatever the database size).
//! - Query for entry `(row, column)`: `c1 = A1 s1 + e1 + Δ u_column` and, per entry of the
//!   record, `c2 = A2 s2 + e2 + Δ u_row` with fresh `s1`, `s2`.
//! - Answer: `a1 = D'c1 ∈ Z_q^ℓ`, `Y = Decomp(a1ᵀ) ∈ Z_p^{κ×ℓ}`; send `h = Y'A2` (`κ × n`), and
//!   per `c2`: `M'c2` (`κn`) and `Y'c2` (`κ`). About 32 KiB for one entry at `κ = 4`.
//! - Decode: `round((M'c2 - H2 s2)/Δ)` are the digits of row `row` of `H1`, and
//!   `round((Y'c2 - h s2)/Δ)` the digits of `a1[row]`; recompose both, then
//!   `entry = round((a1[row] - H1[row] s1)/Δ)` as in SimplePIR.
//!
//! The client decodes `κ(n+1) + 1` values per entry, which is why DoublePIR's `p` is a little
//! smaller (see [`crate::params`]). Privacy: `c1` and every `c2` are LWE samples under fresh
//! secrets; the server's work and answer size do not depend on the index.

use pir_core::Error;
use pir_kernels::matvec::{self, Packing};
use rand::CryptoRng;

use crate::gaussian::ErrorSampler;
use crate::lwe::{self, Words, ZpMatrix};
use crate::params::{self, Location, Params, Scheme, LWE_N};
use crate::prg::{self, Seed};
use crate::records;
use crate::simple::column_query;
use crate::single::{BuildInput, Saved};
use crate::wire::{self, HintHeader};

/// A DoublePIR server: the packed database, `Decomp(H1ᵀ)` and `A2`.
#[derive(Debug)]
pub struct DoublePirServer {
    header: HintHeader,
    db: ZpMatrix,
    hint_digits: ZpMatrix,
    a2: Words,
    a2_sums: Vec<u32>,
    /// The rows of the whole matrix this server holds (all of them unless it is a shard).
    rows: std::ops::Range<usize>,
}

impl DoublePirServer {
    /// Packs the records and computes `H1` and the client hint `H2` for the public matrices
    /// of the seeds (`A1`, `A2`), or takes both saved for the same records, seeds and version
    /// (the saved hint's header must match). Returns the server and the offline work to save:
    /// the hint message and `H1`. `progress` counts rows of `A1` and then of `A2` consumed
    /// (`total = m + ℓ`).
    pub fn build(input: BuildInput<'_>) -> Result<(DoublePirServer, Saved), Error> {
        let rows = 0..input.params.rows();
        Self::build_rows(input, rows)
    }

    /// A shard of the server: only `rows` of the database matrix, packed from
    /// `input.records`, which holds that shard's part ([`crate::double_rows::row_part`]; all
    /// rows: the records). Its `H1` is those rows of `H1`, its `A2` those rows of `A2`, so its
    /// hint and answers are its terms of the sums over rows that make the whole server's
    /// (`crate::double_rows` says why); the header is the whole database's, so the summed
    /// hint is byte for byte the unsharded one. Progress counts rows of `A1` and then of its
    /// `A2` consumed.
    pub fn build_rows(
        input: BuildInput<'_>,
        rows: std::ops::Range<usize>,
    ) -> Result<(DoublePirServer, Saved), Error> {
        let header = input.header(Scheme::DoublePir)?;
        let params = header.params;
        let db = crate::double_rows::pack_rows(&params, input.records, &rows)?;
        let (count, columns) = (rows.len(), params.columns());
        let total = (columns + count) as u64;
        let progress = input.progress;
        let (h1, saved_hint) = match input.saved {
            Some(saved) => {
                let (h1, hint) = saved.check(&header, count * LWE_N)?;
                (h1, Some(hint))
            }
            None => (
                db.times_public(&header.seed, &mut |done, _| progress(done, total)),
                None,
            ),
        };
        let seed2 = input.seeds[1];
        let hint_digits = digits_of_columns(&params, &h1, count, LWE_N)?;
        let mut a2 = Words::zeroed(count * LWE_N);
        prg::expand_rows(&seed2, rows.start, &mut a2);
        let mut a2_sums = vec![0u32; LWE_N];
        lwe::add_rows(&mut a2_sums, &a2);
        let hint = match saved_hint {
            Some(hint) => hint,
            None => {
                let h2 = hint_digits.times_dense(
                    &a2,
                    &a2_sums,
                    Some(&mut |done| progress(columns as u64 + done, total)),
                );
                wire::encode_hint(&header, &h2)
            }
        };
        let server = DoublePirServer {
            header,
            db,
            hint_digits,
            a2,
            a2_sums,
            rows,
        };
        Ok((server, Saved { hint, extra: h1 }))
    }

    /// The database shape.
    pub fn params(&self) -> &Params {
        &self.header.params
    }

    /// The hint header.
    pub fn header(&self) -> &HintHeader {
        &self.header
    }

    /// Bytes the server keeps in memory: database, `Decomp(H1ᵀ)` and `A2`.
    pub fn memory_bytes(&self) -> usize {
        self.db.memory_bytes() + self.hint_digits.memory_bytes() + 4 * self.a2.len()
    }

    /// Answers one query message.
    pub fn answer(&self, query: &[u8]) -> Result<Vec<u8>, Error> {
        let words = wire::decode_query(query, &self.header.params, &self.header.version)?;
        let mut answers = self.answer_decoded(&[words])?;
        answers
            .pop()
            .ok_or_else(|| Error::InvalidParameter("no answer computed".into()))
    }

    /// Answers many queries: the first layer of all of them in shared passes over the
    /// database, the second layer of all their `c2` in shared passes over `Decomp(H1ᵀ)`.
    pub fn answer_batch(&self, queries: &[&[u8]]) -> Vec<Result<Vec<u8>, Error>> {
        let decoded: Vec<Result<Vec<u32>, Error>> = queries
            .iter()
            .map(|q| wire::decode_query(q, &self.header.params, &self.header.version))
            .collect();
        let valid: Vec<Vec<u32>> = decoded.iter().flatten().cloned().collect();
        let mut answers = match self.answer_decoded(&valid) {
            Ok(answers) => answers.into_iter(),
            Err(e) => return queries.iter().map(|_| Err(e.clone())).collect(),
        };
        decoded
            .into_iter()
            .map(|q| {
                q.and_then(|_| {
                    answers
                        .next()
                        .ok_or_else(|| Error::InvalidParameter("no answer computed".into()))
                })
            })
            .collect()
    }

    fn answer_decoded(&self, queries: &[Vec<u32>]) -> Result<Vec<Vec<u8>>, Error> {
        let params = &self.header.params;
        let (whole_rows, columns) = (params.rows(), params.columns());
        // A shard multiplies only its rows' entries of each `c2`.
        let (mine, rows) = (self.rows.clone(), self.rows.len());
        let per_record = params.entries_per_record();
        let kappa = params.digits();
        let c1s: Vec<&[u32]> = queries.iter().map(|q| &q[..columns]).collect();
        let first = self.db.times_vectors(&c1s);
        let c2s: Vec<&[u32]> = queries
            .iter()
            .flat_map(|q| q[columns..].chunks_exact(whole_rows))
            .map(|c2| &c2[mine.clone()])
            .collect();
        let second = self.hint_digits.times_vectors(&c2s);
        let (k1, k2) = (c1s.len(), c2s.len());
        let mut answers = Vec::with_capacity(queries.len());
        for (q, query) in queries.iter().enumerate() {
            let a1: Vec<u32> = (0..rows).map(|i| first[i * k1 + q]).collect();
            // Y = Decomp(a1ᵀ), one vector of ℓ digits per k (uncentered: the shift is
            // applied once per product below, as `ZpMatrix` does).
            let y = digit_vectors(params, &a1);
            let y_refs: Vec<&[u32]> = y.iter().map(Vec::as_slice).collect();
            let mut words = vec![0u32; kappa * LWE_N];
            matvec::vectors_times_dense(&y_refs, &self.a2, LWE_N, &mut words);
            let center = params.center();
            for row in words.chunks_exact_mut(LWE_N) {
                for (h, &s) in row.iter_mut().zip(&self.a2_sums) {
                    *h = h.wrapping_sub(center.wrapping_mul(s));
                }
            }
            for j in 0..per_record {
                let column = q * per_record + j;
                let c2 = &query[columns + j * whole_rows..][..whole_rows][mine.clone()];
                let sum = c2.iter().fold(0u32, |s, &x| s.wrapping_add(x));
                let shift = center.wrapping_mul(sum);
                words.extend((0..kappa * LWE_N).map(|r| second[r * k2 + column]));
                words.extend(y.iter().map(|digits| {
                    let dot = digits
                        .iter()
                        .zip(c2)
                        .fold(0u32, |s, (&d, &x)| s.wrapping_add(d.wrapping_mul(x)));
                    dot.wrapping_sub(shift)
                }));
            }
            answers.push(wire::encode_answer(Scheme::DoublePir, &words));
        }
        Ok(answers)
    }
}

/// `Decomp(xᵀ)` of the first answer `x` (`ℓ` words): `κ` vectors, vector `k` holding digit
/// `k` of every entry (uncentered). At `p = 256` the digits are the bytes of each word.
fn digit_vectors(params: &Params, x: &[u32]) -> Vec<Vec<u32>> {
    let p = params.p.max(2);
    let kappa = params.digits();
    let mut y = vec![vec![0u32; x.len()]; kappa];
    if p.is_power_of_two() {
        let (bits, mask) = (p.trailing_zeros(), p - 1);
        for (k, digits) in y.iter_mut().enumerate() {
            let shift = bits * k as u32;
            for (d, &v) in digits.iter_mut().zip(x) {
                *d = v.checked_shr(shift).unwrap_or(0) & mask;
            }
        }
    } else {
        for (i, &v) in x.iter().enumerate() {
            let mut v = v;
            for digits in y.iter_mut() {
                digits[i] = v % p;
                v /= p;
            }
        }
    }
    y
}

/// `Decomp(Xᵀ)` for an `rows × width` matrix `X` over `Z_q`: a `κ·width × rows` matrix over
/// `Z_p` whose row `c κ + k` holds digit `k` of column `c` of `X`.
fn digits_of_columns(
    params: &Params,
    x: &[u32],
    rows: usize,
    width: usize,
) -> Result<ZpMatrix, Error> {
    let p = params.p;
    let kappa = params.digits();
    let packing = Packing::new(params::element_bits(p))
        .ok_or_else(|| Error::InvalidParameter("plaintext modulus out of range".into()))?;
    let powers: Vec<u64> = (0..kappa as u32).map(|k| u64::from(p).pow(k)).collect();
    Ok(ZpMatrix::from_fn(
        kappa * width,
        rows,
        packing,
        params.center(),
        |r, i| {
            let (c, k) = (r / kappa, r % kappa);
            ((u64::from(x[i * width + c]) / powers[k]) % u64::from(p)) as u32
        },
    ))
}

/// A DoublePIR client: the hint `H2` and the seeds of `A1` and `A2`.
#[derive(Debug)]
pub struct DoublePirClient {
    header: HintHeader,
    seed2: Seed,
    hint: Vec<u32>,
}

/// What the client keeps between a query and its answer. Holds LWE secrets: never send it.
pub struct DoubleQueryState {
    location: Location,
    secret1: Vec<u32>,
    secrets2: Vec<Vec<u32>>,
}

crate::single::redacted_debug!(DoubleQueryState);

impl DoublePirClient {
    /// Parses a full DoublePIR hint message.
    pub fn new(hint: &[u8]) -> Result<DoublePirClient, Error> {
        let (header, hint) = wire::decode_full_hint(hint, Scheme::DoublePir)?;
        let seed2 = header
            .seed2
            .ok_or_else(|| Error::Malformed("DoublePIR hint without a second seed".into()))?;
        Ok(DoublePirClient {
            header,
            seed2,
            hint,
        })
    }

    /// A query for record `index`: the message and the state for [`Self::decode`].
    pub fn query(
        &self,
        index: u64,
        rng: &mut impl CryptoRng,
    ) -> Result<(DoubleQueryState, Vec<u8>), Error> {
        let params = &self.header.params;
        let delta = params.delta();
        // The first layer is SimplePIR's query; one second-layer vector per entry of the record.
        let (location, secret1, c1) = column_query(&self.header, index, rng)?;
        let mut secrets2 = Vec::with_capacity(location.entries);
        let mut vectors = vec![c1];
        let sampler = ErrorSampler::shared();
        for row in location.row..location.row + location.entries {
            let (s2, c2) = lwe::encrypt_unit(&self.seed2, params.rows(), row, delta, sampler, rng);
            secrets2.push(s2);
            vectors.push(c2);
        }
        let refs: Vec<&[u32]> = vectors.iter().map(Vec::as_slice).collect();
        let bytes = wire::encode_query(Scheme::DoublePir, &self.header.version, &refs);
        let state = DoubleQueryState {
            location,
            secret1,
            secrets2,
        };
        Ok((state, bytes))
    }

    /// Decodes the answer into the record (`ceil(bits / 8)` bytes, bits LSB first).
    pub fn decode(&self, state: &DoubleQueryState, answer: &[u8]) -> Result<Vec<u8>, Error> {
        let params = &self.header.params;
        let p = params.p;
        let kappa = params.digits();
        let words = wire::decode_answer(answer, params)?;
        let (h, mut rest) = words.split_at(kappa * LWE_N);
        let mut entries = Vec::with_capacity(state.secrets2.len());
        for s2 in &state.secrets2 {
            let (hint_part, tail) = rest.split_at(kappa * LWE_N);
            let (answer_part, tail) = tail.split_at(kappa);
            rest = tail;
            let digit = |noisy: u32, mask_row: &[u32]| {
                lwe::round_entry(noisy.wrapping_sub(prg::dot(mask_row, s2)), p)
            };
            // Row `row` of H1, one column (κ digits) at a time.
            let h1_row: Vec<u32> = (0..LWE_N)
                .map(|c| {
                    let digits = (0..kappa).map(|k| {
                        let r = c * kappa + k;
                        digit(hint_part[r], &self.hint[r * LWE_N..(r + 1) * LWE_N])
                    });
                    lwe::recompose(digits.collect::<Vec<_>>().into_iter(), p)
                })
                .collect();
            let a1_digits: Vec<u32> = (0..kappa)
                .map(|k| digit(answer_part[k], &h[k * LWE_N..(k + 1) * LWE_N]))
                .collect();
            let a1 = lwe::recompose(a1_digits.into_iter(), p);
            let noisy = a1.wrapping_sub(prg::dot(&h1_row, &state.secret1));
            entries.push(lwe::round_entry(noisy, p));
        }
        records::assemble(params, &state.location, &entries)
    }
}

crate::single::single_server!(DoublePirServer);
crate::single::single_client!(DoublePirClient, DoubleQueryState);
