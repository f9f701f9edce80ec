//! A record database split into shards (`pir db build --shards S`), one shard's server state
//! (`pir shard serve`), and the front end's fan-out over HTTPS (`pir front serve`).
//!
//! ```text
//! DIR/shard-map.bin   the signed shard map (pir_service::shard::map): the scheme, the
//!                     database version, its rows, the whole database's header as `about`,
//!                     and per shard its first row, row count and the SHA-256 of its part
//! DIR/shard-K.part    shard K's records: SimplePIR, whole matrix columns (a record range,
//!                     back to back); DoublePIR and YPIR, a range of matrix rows
//!                     (pir_lattice::double_rows::row_part; YPIR's whole row groups, and
//!                     YPIR+SP's rows for records over 8 bytes)
//! ```
//!
//! SimplePIR shards split on whole columns of its matrix (runs of consecutive records): the
//! map's rows are records. DoublePIR shards split on the matrix's rows (strided sets of
//! records): the map's rows are the matrix's `ℓ` rows. Either way the answers add up
//! (`pir_service::shard` has the algebra). Each shard server holds only its part; the front
//! end holds no records at all.

use std::path::Path;
use std::sync::Arc;

use pir_client::transport::{HttpsTransport, Transport};
use pir_core::{Codec, SchemeId};
use pir_keys::{PublicKey, SecretKey};
use pir_lattice::{Params, Scheme};
use pir_service::shard::{split, Done, Fanout, ShardEntry, ShardMap, SignedShardMap};
use pir_service::Lattice;

use crate::format::{DbHeader, RecordsError};
use crate::lookup;

// The file names every sharded database shares.
pub use pir_service::shard::map::{part_path, MAP_FILE};
/// Largest shard map file read.
const MAX_MAP_BYTES: u64 = 1 << 20;

/// The `scheme` shape of the database `header` describes.
fn params_of(header: &DbHeader, scheme: Scheme) -> Result<Params, RecordsError> {
    let bits = u32::try_from(header.record_size * 8)
        .map_err(|_| RecordsError::Input("records are too large".into()))?;
    Params::new(scheme, header.records, bits)
        .map_err(|e| RecordsError::Input(format!("{} cannot serve it: {e}", scheme.id().name())))
}

/// The lattice scheme of a map's shards (SimplePIR, DoublePIR or YPIR): the scheme a whole
/// server is asked for (`--scheme ypir` lays records over 8 bytes out for YPIR+SP, whose map
/// names YPIR+SP).
fn scheme_of(map: &ShardMap) -> Result<Scheme, RecordsError> {
    match map.scheme {
        SchemeId::SimplePir => Ok(Scheme::SimplePir),
        SchemeId::DoublePir => Ok(Scheme::DoublePir),
        SchemeId::Ypir | SchemeId::YpirSp => Ok(Scheme::Ypir),
        other => Err(RecordsError::Malformed(format!(
            "shards of {} are not lattice shards",
            other.name()
        ))),
    }
}

/// Writes the database `header`/`payload` into `dir` as `shards` shard files of `scheme`
/// (SimplePIR, DoublePIR or YPIR) and the map, signed by `key`. Returns the map.
pub fn write(
    dir: &Path,
    (header, payload): (&DbHeader, &[u8]),
    scheme: Scheme,
    shards: usize,
    key: &SecretKey,
) -> Result<ShardMap, RecordsError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RecordsError::Io { path, source }
    };
    let (params, rows, ranges) = layout(header, scheme, shards)?;
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut entries = Vec::with_capacity(shards);
    for (k, rows) in ranges.iter().enumerate() {
        let part = part_of(&params, payload, rows)?;
        let path = part_path(dir, k);
        pir_fs::write_atomic(&path, |file| std::io::Write::write_all(file, &part))
            .map_err(io(&path))?;
        entries.push(ShardEntry {
            id: k as u16,
            first_row: rows.start,
            rows: rows.end - rows.start,
            part_hash: pir_keys::sha256(&part),
        });
    }
    write_map(dir, header, (&params, scheme), rows, entries, key)
}

/// How `header`'s database splits into `shards` shards of `scheme`: its parameters (YPIR lays
/// records over 8 bytes out for YPIR+SP), the map's row count, and each shard's rows.
pub(crate) fn layout(
    header: &DbHeader,
    scheme: Scheme,
    shards: usize,
) -> Result<(Params, u64, Vec<std::ops::Range<u64>>), RecordsError> {
    let params = params_of(header, scheme)?;
    let (rows, unit) = match params.scheme {
        // YPIR: whole row groups (a record's `e` rows), so that each shard holds whole
        // columns of the second layer.
        Scheme::Ypir => (
            params.rows() as u64,
            params.entries_per_record().max(1) as u64,
        ),
        Scheme::DoublePir | Scheme::YpirSp => (
            params.rows() as u64,
            split::double_pir_unit(&params, shards),
        ),
        _ => (header.records, split::simple_pir_unit(&params)),
    };
    let ranges = split::split_rows(rows, shards, unit)
        .map_err(|e| RecordsError::Input(format!("{e} (fewer shards or more records)")))?;
    Ok((params, rows, ranges))
}

/// The map of `header`'s database laid out by `params` (for `scheme`: the database version
/// names the scheme asked for, the map the one that lays it out), `rows` rows in all and the
/// shards `entries`, signed with `key` and written to `dir`'s [`MAP_FILE`] (atomically).
/// Ed25519 signatures are deterministic, so the same map and key give the same file.
pub(crate) fn write_map(
    dir: &Path,
    header: &DbHeader,
    (params, scheme): (&Params, Scheme),
    rows: u64,
    entries: Vec<ShardEntry>,
    key: &SecretKey,
) -> Result<ShardMap, RecordsError> {
    let map = ShardMap {
        scheme: params.scheme.id(),
        database_id: header.version(scheme.id().name()),
        rows,
        row_bytes: header.record_size as u32,
        about: header.encode().to_vec(),
        shards: entries,
    };
    let path = dir.join(MAP_FILE);
    let bytes = map.clone().sign(key).to_bytes();
    pir_fs::write_atomic(&path, |file| std::io::Write::write_all(file, &bytes))
        .map_err(|source| RecordsError::Io { path, source })?;
    Ok(map)
}

/// The bytes of `payload` that shard `rows` holds: SimplePIR, records `rows` (whole matrix
/// columns); DoublePIR, matrix rows `rows`.
fn part_of(
    params: &Params,
    payload: &[u8],
    rows: &std::ops::Range<u64>,
) -> Result<Vec<u8>, RecordsError> {
    let bad = |e: String| RecordsError::Malformed(e);
    if matches!(
        params.scheme,
        Scheme::DoublePir | Scheme::Ypir | Scheme::YpirSp
    ) {
        let rows = split::double_pir_rows(params, rows).map_err(|e| bad(e.to_string()))?;
        return pir_lattice::double_rows::row_part(params, payload, &rows)
            .map_err(|e| bad(e.to_string()));
    }
    let columns = split::simple_pir_columns(params, rows).map_err(|e| bad(e.to_string()))?;
    let bytes =
        pir_lattice::simple::column_bytes(params, columns).map_err(|e| bad(e.to_string()))?;
    payload
        .get(bytes.start as usize..bytes.end as usize)
        .map(<[u8]>::to_vec)
        .ok_or_else(|| bad("the part lies beyond the records".into()))
}

/// Reads and checks the map in `dir`: its signature, and its signer if `expected` is given.
pub fn read_map(dir: &Path, expected: Option<&PublicKey>) -> Result<ShardMap, RecordsError> {
    let path = dir.join(MAP_FILE);
    let io = |source| RecordsError::Io {
        path: path.clone(),
        source,
    };
    let size = std::fs::metadata(&path).map_err(io)?.len();
    if size > MAX_MAP_BYTES {
        return Err(RecordsError::Malformed(format!(
            "{}: {size} bytes is too large for a shard map",
            path.display()
        )));
    }
    let bytes = std::fs::read(&path).map_err(io)?;
    let signed = SignedShardMap::from_bytes(&bytes, &())
        .map_err(|e| RecordsError::Malformed(format!("{}: {e}", path.display())))?;
    let map = signed
        .verify(expected)
        .map_err(|e| RecordsError::Malformed(format!("{}: {e}", path.display())))?;
    if scheme_of(map).is_err()
        && !is_xor(map)
        && !is_breach(map)
        && !pir_safebrowsing::shard::is_safebrowsing(map)
    {
        return Err(RecordsError::Malformed(format!(
            "{}: shards of {} are not served yet",
            path.display(),
            map.scheme.name()
        )));
    }
    Ok(map.clone())
}

/// Shard `k` of the database in `dir`: its part checked against the map, packed, and its
/// part of the hint computed (`progress` follows that).
pub fn open_shard(
    dir: &Path,
    map: &ShardMap,
    k: usize,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Lattice, RecordsError> {
    let entry = map.shards.get(k).ok_or_else(|| {
        RecordsError::Input(format!(
            "no shard {k}: the map has shards 0 to {}",
            map.shards.len() - 1
        ))
    })?;
    let path = part_path(dir, k);
    let part = std::fs::read(&path).map_err(|source| RecordsError::Io {
        path: path.clone(),
        source,
    })?;
    if pir_keys::sha256(&part) != entry.part_hash {
        return Err(RecordsError::Malformed(format!(
            "{} is not shard {k}'s part of this database (its hash differs from the map's)",
            path.display()
        )));
    }
    let header = DbHeader::decode(&map.about)?;
    let scheme = scheme_of(map)?;
    let params = params_of(&header, scheme)?;
    let bad = |e: String| RecordsError::Malformed(format!("shard {k}: {e}"));
    let slice = match scheme {
        Scheme::DoublePir | Scheme::Ypir => split::double_pir_rows(&params, &entry.range()),
        _ => split::simple_pir_columns(&params, &entry.range()),
    }
    .map_err(|e| bad(e.to_string()))?;
    let database = lookup::lattice_database(&header, &part, scheme);
    let part_id = map.part_id(k).ok_or_else(|| bad("no part id".into()))?;
    let (lattice, _) =
        Lattice::shard(database, slice, part_id, None, progress).map_err(|e| bad(e.to_string()))?;
    Ok(lattice)
}

/// The replicas of every shard over one HTTPS transport: each request goes to the replica the
/// front end names, on the runtime; a failure or a missed transport deadline is its reply.
pub struct HttpsFanout {
    transport: Arc<HttpsTransport>,
    /// Per shard: the transport's index and key of each replica.
    replicas: Vec<Vec<(usize, PublicKey)>>,
    runtime: tokio::runtime::Handle,
}

/// Largest shard reply read.
const MAX_REPLY: usize = 64 << 20;

impl HttpsFanout {
    /// A fan-out over `replicas[k]` = the (URL, key) of shard `k`'s replicas, on `runtime`.
    pub fn new(
        replicas: &[Vec<(String, PublicKey)>],
        timeouts: pir_client::transport::Timeouts,
        runtime: tokio::runtime::Handle,
    ) -> Result<Self, pir_client::transport::TransportError> {
        let all: Vec<(String, PublicKey)> = replicas.iter().flatten().cloned().collect();
        let transport = Arc::new(HttpsTransport::with_timeouts(&all, timeouts)?);
        let mut next = 0;
        let replicas = replicas
            .iter()
            .map(|shard| {
                shard
                    .iter()
                    .map(|(_, key)| {
                        next += 1;
                        (next - 1, *key)
                    })
                    .collect()
            })
            .collect();
        Ok(Self {
            transport,
            replicas,
            runtime,
        })
    }

    /// Shard `k`'s hint download of its part `part_id`, from the first replica that gives it.
    pub async fn hint(&self, k: usize, part_id: &[u8; 32]) -> Result<Vec<u8>, String> {
        let mut why = String::from("no replica given");
        for &(index, _) in &self.replicas[k] {
            match self
                .transport
                .hint_of(index, part_id, pir_service::lattice::MAX_DOWNLOAD)
                .await
            {
                Ok(download) => return Ok(download),
                Err(e) => why = e.to_string(),
            }
        }
        Err(why)
    }

    /// Every shard's hint download of the part `map` names, waited for on this thread: call
    /// it off the runtime's threads (a server kind's opening runs on a blocking thread).
    pub fn hints(&self, map: &ShardMap) -> Result<Vec<Vec<u8>>, RecordsError> {
        let mut downloads = Vec::with_capacity(map.shards.len());
        for k in 0..map.shards.len() {
            let part_id = map
                .part_id(k)
                .ok_or_else(|| RecordsError::Malformed(format!("the map has no shard {k}")))?;
            let download = self
                .runtime
                .block_on(self.hint(k, &part_id))
                .map_err(|why| {
                    RecordsError::Input(format!(
                        "shard {k} has no live replica serving its part of database {} ({why})",
                        hex::encode(&map.database_id[..8])
                    ))
                })?;
            downloads.push(download);
        }
        Ok(downloads)
    }
}

impl Fanout for HttpsFanout {
    fn send(&self, shard: usize, replica: usize, request: Arc<Vec<u8>>, done: Done) {
        let Some(&(index, key)) = self.replicas.get(shard).and_then(|r| r.get(replica)) else {
            done(Err(format!("no replica {replica} of shard {shard}")));
            return;
        };
        let transport = self.transport.clone();
        // Spawned, not awaited: the front end waits for the first valid part of each shard
        // on its own thread and may ask another replica meanwhile (a hedge).
        self.runtime.spawn(async move {
            let reply = transport
                .exchange(index, request.to_vec(), MAX_REPLY)
                .await
                .map(|reply| (reply, key))
                .map_err(|e| e.to_string());
            done(reply);
        });
    }
}

/// Whether `map` is one of an XOR database.
pub fn is_xor(map: &ShardMap) -> bool {
    pir_service::shard::xor_front::SCHEMES.contains(&map.scheme)
}

/// Whether `map` is one of a breach database (`pir breach build --shards`: its shards answer
/// plain RAID-PIR, its front end plays the QDP server).
pub fn is_breach(map: &ShardMap) -> bool {
    map.scheme == SchemeId::Qdp
}
