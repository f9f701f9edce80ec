//! The offline/online schemes side by side (`pir bench --modes singlepass,checklist,dpf`): one
//! row per scheme at one shape (default 3,000,000 records of 32 bytes), in one run, on the
//! caller's rayon pool.
//!
//! Per scheme: the offline server's work for one client's hints and the client's setup
//! (SinglePass: one pass, [`pir_xor::singlepass::server::hints`]; Checklist: its puncturable
//! sets, [`crate::checklist::run_checklist`]; DPF: none), one server's answer to one lookup
//! (median), the client's work per lookup, bytes per lookup, and the cost of an update of 1 %
//! of the records against a re-hint (offline server plus client setup):
//! - SinglePass: the client XORs each published delta into the one hint holding its record
//!   ([`pir_xor::singlepass::Client::apply`]);
//! - Checklist: the offline server's hints for one new bucket of 1 % of the records (a
//!   waterfall step without merges; `--modes checklist-updates` runs the waterfall itself);
//! - DPF: nothing to update (no hints).

use std::time::Instant;

use pir_core::{Database, DbShape, Error, MultiServerScheme};
use pir_xor::singlepass::{server, Changes, Client, Params};
use pir_xor::DpfPir;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::Serialize;

use crate::median_ms;

/// One scheme's row.
#[derive(Debug, Clone, Serialize)]
pub struct SchemeRow {
    /// `singlepass`, `checklist` or `dpf`.
    pub scheme: String,
    /// Records `B`.
    pub records: u64,
    /// Bytes per record.
    pub record_bytes: usize,
    /// The scheme's parameters, in words (`Q=62 m=48388`).
    pub params: String,
    /// Hint download, bytes.
    pub hint_bytes: usize,
    /// Offline server: one client's hints, seconds.
    pub offline_server_s: f64,
    /// Client: setting up from the hints, seconds.
    pub offline_client_s: f64,
    /// One server's answer to one lookup, microseconds (median).
    pub online_server_us: f64,
    /// The client's work per lookup, microseconds (median).
    pub client_us: f64,
    /// Bytes sent per lookup (both servers, scheme bodies).
    pub up_bytes: usize,
    /// Bytes received per lookup.
    pub down_bytes: usize,
    /// An update of 1 % of the records, seconds (module documentation).
    pub update_1pct_s: f64,
    /// `update_1pct_s` over a re-hint (`offline_server_s + offline_client_s`); 0 without hints.
    pub update_vs_rehint: f64,
}

impl SchemeRow {
    /// The text line.
    pub fn line(&self) -> String {
        format!(
            "{:<10} {}x{}B {:<18} offline server {:>8.3} s client {:>7.3} s | online server \
             {:>9.1} us client {:>7.1} us | {} B up {} B down | update 1 % {:.4} s = {:.4}x a \
             re-hint",
            self.scheme,
            self.records,
            self.record_bytes,
            self.params,
            self.offline_server_s,
            self.offline_client_s,
            self.online_server_us,
            self.client_us,
            self.up_bytes,
            self.down_bytes,
            self.update_1pct_s,
            self.update_vs_rehint
        )
    }
}

/// The comparison lines of `rows` against the first: each names both sides' parameters.
pub fn comparisons(rows: &[SchemeRow]) -> Vec<String> {
    let Some(first) = rows.first() else {
        return Vec::new();
    };
    rows.iter()
        .skip(1)
        .map(|other| {
            let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
            format!(
                "{} ({}) against {} ({}), both {}x{}B, same run: offline server {:.3}x, online \
                 server {:.3}x",
                first.scheme,
                first.params,
                other.scheme,
                other.params,
                first.records,
                first.record_bytes,
                ratio(first.offline_server_s, other.offline_server_s),
                ratio(first.online_server_us, other.online_server_us)
            )
        })
        .collect()
}

fn database(records: u64, record_bytes: usize) -> Result<Database, Error> {
    Ok(Database::random(
        DbShape::new(records, record_bytes)?,
        &mut ChaCha20Rng::seed_from_u64(1),
    ))
}

/// Runs `scheme` at `records` x `record_bytes`: `runs` offline phases, `lookups` lookups.
pub fn run(
    scheme: &str,
    records: u64,
    record_bytes: usize,
    runs: usize,
    lookups: usize,
) -> Result<SchemeRow, Error> {
    match scheme {
        "singlepass" => run_singlepass(records, record_bytes, runs, lookups),
        "checklist" => run_checklist(records, record_bytes, runs, lookups),
        "dpf" => run_dpf(records, record_bytes, lookups),
        other => Err(Error::InvalidParameter(format!(
            "unknown scheme {other:?}: use singlepass, checklist or dpf"
        ))),
    }
}

fn seconds(start: Instant) -> f64 {
    start.elapsed().as_secs_f64()
}

/// SinglePass at its default layout.
fn run_singlepass(
    records: u64,
    record_bytes: usize,
    runs: usize,
    lookups: usize,
) -> Result<SchemeRow, Error> {
    let db = database(records, record_bytes)?;
    let params = Params::new(records, record_bytes)?;
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let (mut server_times, mut client_times) = (Vec::new(), Vec::new());
    let mut client = None;
    for _ in 0..runs.max(1) {
        let request = Client::offline_request(&mut rng);
        let start = Instant::now();
        let hints = server::hints(&params, db.bytes(), &request)?;
        server_times.push(start.elapsed());
        let start = Instant::now();
        client = Some(Client::new(params, &request, &hints)?);
        client_times.push(start.elapsed());
    }
    let mut client = client.ok_or_else(|| Error::InvalidParameter("no run".into()))?;
    let (mut online, mut work) = (Vec::new(), Vec::new());
    for _ in 0..lookups.max(1) {
        let index = rng.random_range(0..records);
        let start = Instant::now();
        let (query, pending) = client.query(index, &mut rng)?;
        let mut spent = start.elapsed();
        let start = Instant::now();
        let a = server::answer(&params, db.bytes(), &query.online)?;
        online.push(start.elapsed());
        let r = server::answer(&params, db.bytes(), &query.refresh)?;
        let start = Instant::now();
        let record = client.finish(pending, &a, &r)?;
        spent += start.elapsed();
        work.push(spent);
        if record != db.block(index as usize)[..record_bytes] {
            return Err(Error::InvalidParameter(
                "a lookup returned a wrong record".into(),
            ));
        }
    }
    // 1 % of the records changed: the client applies the published deltas.
    let mut changes = Changes::new(record_bytes);
    let mut delta = vec![0u8; record_bytes];
    for _ in 0..(records / 100).max(1) {
        rng.fill_bytes(&mut delta);
        changes.push_delta(rng.random_range(0..records), &delta)?;
    }
    let start = Instant::now();
    client.apply(&changes)?;
    let update = seconds(start);
    let (offline_server_s, offline_client_s) =
        (median_ms(server_times) / 1e3, median_ms(client_times) / 1e3);
    Ok(SchemeRow {
        scheme: "singlepass".into(),
        records,
        record_bytes,
        params: format!("Q={} m={}", params.rows(), params.columns()),
        hint_bytes: params.hint_bytes(),
        offline_server_s,
        offline_client_s,
        online_server_us: median_ms(online) * 1e3,
        client_us: median_ms(work) * 1e3,
        up_bytes: 2 * (pir_xor::singlepass::wire::SHAPE_LEN + 2 * params.rows()),
        down_bytes: 2 * params.answer_bytes(),
        update_1pct_s: update,
        update_vs_rehint: update / (offline_server_s + offline_client_s),
    })
}

/// Checklist (`crate::checklist::run_checklist`), and the hints of one new 1 % bucket.
fn run_checklist(
    records: u64,
    record_bytes: usize,
    runs: usize,
    lookups: usize,
) -> Result<SchemeRow, Error> {
    use pir_xor::checklist::{server as ck_server, Client as CkClient, Params as CkParams};
    let row = crate::checklist::run_checklist(records, record_bytes, runs, lookups)?;
    let bucket = (records / 100).max(1);
    let db = database(bucket, record_bytes)?;
    let params = CkParams::new(bucket, record_bytes)?;
    let request = CkClient::offline_request(&mut ChaCha20Rng::seed_from_u64(3));
    let start = Instant::now();
    let hints = ck_server::hints(&params, &db, &request, 0..params.hints())?;
    std::hint::black_box(CkClient::new(params, &request, &hints)?);
    let update = seconds(start);
    Ok(SchemeRow {
        scheme: "checklist".into(),
        records,
        record_bytes,
        params: format!(
            "{} sets/index s={} m={}",
            pir_xor::checklist::COVERAGE,
            row.set_size,
            row.hints
        ),
        hint_bytes: row.hint_bytes,
        offline_server_s: row.offline_server_s,
        offline_client_s: row.offline_client_s,
        online_server_us: row.online_server_us,
        client_us: row.client_us,
        up_bytes: row.up_bytes,
        down_bytes: row.down_bytes,
        update_1pct_s: update,
        update_vs_rehint: update / (row.offline_server_s + row.offline_client_s),
    })
}

/// DPF: no offline phase; each server evaluates its key over every record.
fn run_dpf(records: u64, record_bytes: usize, lookups: usize) -> Result<SchemeRow, Error> {
    let db = database(records, record_bytes)?;
    let dpf = DpfPir::new(db.shape());
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let (mut online, mut work) = (Vec::new(), Vec::new());
    let (mut up, mut down) = (0, 0);
    // A DPF answer reads the whole database: a tenth of the lookups keeps the run short.
    for _ in 0..(lookups / 10).max(3) {
        let index = rng.random_range(0..records) as usize;
        let start = Instant::now();
        let (queries, state) = dpf.query(&[index], &mut rng)?;
        let mut spent = start.elapsed();
        let start = Instant::now();
        let a = dpf.answer(&db, &queries[0])?;
        online.push(start.elapsed());
        let b = dpf.answer(&db, &queries[1])?;
        up = queries.iter().map(|q| dpf.encode_query(q).len()).sum();
        down = dpf.encode_answer(&a).len() + dpf.encode_answer(&b).len();
        let start = Instant::now();
        let blocks = dpf.decode(&state, &[a, b])?;
        spent += start.elapsed();
        work.push(spent);
        if blocks.first().map(|b| &b[..record_bytes]) != Some(db.block(index)) {
            return Err(Error::InvalidParameter(
                "a lookup returned a wrong record".into(),
            ));
        }
    }
    Ok(SchemeRow {
        scheme: "dpf".into(),
        records,
        record_bytes,
        params: format!(
            "key depth {}",
            u64::BITS - (records.max(2) - 1).leading_zeros()
        ),
        hint_bytes: 0,
        offline_server_s: 0.0,
        offline_client_s: 0.0,
        online_server_us: median_ms(online) * 1e3,
        client_us: median_ms(work) * 1e3,
        up_bytes: up,
        down_bytes: down,
        update_1pct_s: 0.0,
        update_vs_rehint: 0.0,
    })
}
