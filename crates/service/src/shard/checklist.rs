//! Sharded Checklist databases (the buckets of a Safe Browsing list, `pir safebrowsing build
//! --shards`): a shard's part of one bucket ([`ChecklistShard`]) and the front end's backend of
//! one bucket ([`ChecklistFront`]), which is, to clients, the bucket's whole Checklist server.
//!
//! A Checklist database is cut by rows: shard `k` holds rows `first..first + n` of the bucket
//! (possibly none). Every scheme a Safe Browsing server answers is an XOR of rows (a punctured
//! set's elements, a hint's set, a SinglePass column per grid row, a DPF selection), so each
//! shard expands the client's query over the whole bucket exactly as a whole server does,
//! XORs the rows it holds (`pir_xor::shard_sets`), and the front end XORs the parts
//! ([`super::XorFront::answer_parts`]: one batch per shard naming the shard's part id for the
//! bucket, retries, hedges, each part's signature, id and count checked).
//!
//! The front end checks every query as the whole server of its role would (the same
//! [`crate::checklist::prepare_query`], so the online role refuses hint requests before any
//! shard sees them) and serves the whole server's info message, so its replies are byte for
//! byte a whole server's with the same key. Privacy: a shard receives the client's query
//! whole, what a whole server of that role receives, and its work depends on no index.

use std::sync::Arc;

use pir_core::{DbShape, Error, SchemeId};
use pir_xor::checklist::Params;
use pir_xor::shard_sets::{self, HeldRows};

use super::map::ShardMap;
use super::{Fanout, XorFront};
use crate::checklist::{self as ck, Info, Prepared, Role, MAX_QUERIES_PER_REQUEST};
use crate::signed::{Backend, Refusal};

/// Domain of a bucket's part id ([`bucket_part_id`]).
const BUCKET_PART_DOMAIN: &[u8] = b"pir shard checklist part v1";

/// The id a query batch for bucket `bucket` (its database id) to shard `k` of `map` names:
/// it binds the map's part id (database, shard, rows) and the bucket, so a part of another
/// bucket, shard or database is refused by the shard and caught by the front end.
pub fn bucket_part_id(map: &ShardMap, k: usize, bucket: &[u8; 32]) -> Option<[u8; 32]> {
    let part = map.part_id(k)?;
    Some(pir_keys::sha256_parts(&[BUCKET_PART_DOMAIN, &part, bucket]))
}

/// Shard `k`'s part of one bucket: its rows of the bucket, answering the whole bucket's
/// queries over them.
pub struct ChecklistShard {
    info: Info,
    singlepass: Option<pir_xor::singlepass::Params>,
    whole: DbShape,
    first: u64,
    rows: Vec<u8>,
    description: Vec<u8>,
}

impl std::fmt::Debug for ChecklistShard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChecklistShard")
            .field("first", &self.first)
            .field("rows", &(self.rows.len() / self.info.params.record_bytes()))
            .finish_non_exhaustive()
    }
}

impl ChecklistShard {
    /// The part of a bucket of `params` (its records stored at exactly `b` bytes) whose rows
    /// `first..` are `rows` (`n b` bytes, `n` possibly 0), answering batches that name
    /// `part_id`.
    pub fn new(
        params: Params,
        rows: Vec<u8>,
        first: u64,
        part_id: [u8; 32],
    ) -> Result<Self, Error> {
        let b = params.record_bytes();
        let held = HeldRows {
            bytes: &rows,
            record_bytes: b,
            first,
        };
        held.check(params.records(), b)?;
        let whole = DbShape::new(params.records(), b)?;
        // A shard answers what its front end sends: the front end enforces its role.
        let info = Info {
            role: Role::Offline,
            params,
            database_id: part_id,
            about: Vec::new(),
        };
        Ok(Self {
            description: info.description(),
            singlepass: ck::singlepass_layout(&params, b),
            info,
            whole,
            first,
            rows,
        })
    }

    fn held(&self) -> HeldRows<'_> {
        HeldRows {
            bytes: &self.rows,
            record_bytes: self.info.params.record_bytes(),
            first: self.first,
        }
    }
}

impl Backend for ChecklistShard {
    type Prepared = Prepared;

    fn accepts(&self, scheme: SchemeId) -> bool {
        ck::Checklist::SCHEMES.contains(&scheme)
    }
    fn database_id(&self) -> &[u8; 32] {
        &self.info.database_id
    }
    fn stale_message(&self) -> String {
        "this shard serves another part: check the front end's shard map".into()
    }
    fn max_queries(&self) -> usize {
        MAX_QUERIES_PER_REQUEST
    }
    fn max_query_body(&self) -> usize {
        ck::query_limit(&self.info.params, self.singlepass.as_ref(), self.whole)
    }
    fn description(&self) -> &[u8] {
        &self.description
    }
    fn prepare(&self, scheme: SchemeId, query: &[u8]) -> Result<Prepared, Refusal> {
        ck::prepare_query(
            &self.info,
            self.singlepass.as_ref(),
            self.whole,
            scheme,
            query,
        )
    }
    fn answer_batch(&self, prepared: Vec<Prepared>) -> Vec<Result<Vec<u8>, Refusal>> {
        let params = &self.info.params;
        prepared
            .into_iter()
            .map(|query| {
                let answer = match query {
                    Prepared::Lookup(key) => {
                        shard_sets::checklist_answer(params, self.held(), &key)
                    }
                    Prepared::Hints(request, range) => {
                        shard_sets::checklist_hints(params, self.held(), &request, range)
                    }
                    Prepared::SinglePass(crate::singlepass::Prepared::Lookup(offsets)) => {
                        match &self.singlepass {
                            Some(sp) => shard_sets::singlepass_answer(sp, self.held(), &offsets),
                            None => Err(Error::InvalidParameter("no SinglePass layout".into())),
                        }
                    }
                    Prepared::SinglePass(crate::singlepass::Prepared::Hints(request)) => {
                        match &self.singlepass {
                            Some(sp) => shard_sets::singlepass_hints(sp, self.held(), &request),
                            None => Err(Error::InvalidParameter("no SinglePass layout".into())),
                        }
                    }
                    // prepare_query refuses changes requests: a bucket publishes none.
                    Prepared::SinglePass(crate::singlepass::Prepared::Changes) => {
                        Err(Error::InvalidParameter("no changes published".into()))
                    }
                    Prepared::Dpf(query) => shard_sets::dpf_answer(self.whole, self.held(), &query),
                };
                answer.map_err(|e| Refusal::internal(e.to_string()))
            })
            .collect()
    }
    fn health(&self) -> String {
        format!(
            "ok checklist shard part={} rows={}..{} of {}\n",
            hex::encode(self.info.database_id),
            self.first,
            self.first + self.held().count(),
            self.info.params.records()
        )
    }
}

/// A query the front end has checked: its scheme and its bytes (sent to the shards as they
/// came).
#[derive(Debug)]
pub struct FrontQuery {
    scheme: SchemeId,
    body: Vec<u8>,
}

/// The front end of one bucket: to clients, the bucket's whole Checklist server of `role`.
pub struct ChecklistFront<F> {
    info: Info,
    singlepass: Option<pir_xor::singlepass::Params>,
    whole: DbShape,
    description: Vec<u8>,
    xor: Arc<XorFront<F>>,
    part_ids: Vec<[u8; 32]>,
}

impl<F> std::fmt::Debug for ChecklistFront<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChecklistFront")
            .field("role", &self.info.role)
            .field("params", &self.info.params)
            .finish_non_exhaustive()
    }
}

impl<F: Fanout> ChecklistFront<F> {
    /// The bucket `bucket` (its database id; its records stored at exactly `b` bytes) of
    /// parameters `params`, served in `role` with `about` in its info, over the shards of
    /// `xor` (whose map is the list's).
    pub fn new(
        params: Params,
        bucket: [u8; 32],
        role: Role,
        about: Vec<u8>,
        xor: Arc<XorFront<F>>,
    ) -> Result<Self, Error> {
        crate::roles::check_about(&about)?;
        let b = params.record_bytes();
        let map = xor.map();
        let part_ids = (0..map.shards.len())
            .map(|k| bucket_part_id(map, k, &bucket))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Error::Malformed("a shard without a part id".into()))?;
        let info = Info {
            role,
            params,
            database_id: bucket,
            about,
        };
        Ok(Self {
            description: info.description(),
            singlepass: ck::singlepass_layout(&params, b),
            whole: DbShape::new(params.records(), b)?,
            info,
            xor,
            part_ids,
        })
    }

    /// What the whole server would say about itself.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// The shards' front end (liveness, counters, probes).
    pub fn xor(&self) -> &Arc<XorFront<F>> {
        &self.xor
    }

    /// The longest answer one query of `scheme` may produce.
    fn max_answer(&self, scheme: SchemeId) -> usize {
        match (scheme, &self.singlepass) {
            (SchemeId::SinglePass, Some(sp)) => crate::singlepass::max_answer(sp),
            (SchemeId::Dpf, _) => self.whole.block_size(),
            _ => ck::max_answer(&self.info.params),
        }
    }
}

impl<F: Fanout> Backend for ChecklistFront<F> {
    type Prepared = FrontQuery;

    fn accepts(&self, scheme: SchemeId) -> bool {
        ck::Checklist::SCHEMES.contains(&scheme)
    }
    fn database_id(&self) -> &[u8; 32] {
        &self.info.database_id
    }
    fn stale_message(&self) -> String {
        format!(
            "this server holds database {}; fetch its info and the hints again",
            hex::encode(&self.info.database_id[..8])
        )
    }
    fn max_queries(&self) -> usize {
        MAX_QUERIES_PER_REQUEST
    }
    fn max_query_body(&self) -> usize {
        ck::query_limit(&self.info.params, self.singlepass.as_ref(), self.whole)
    }
    fn description(&self) -> &[u8] {
        &self.description
    }
    fn prepare(&self, scheme: SchemeId, query: &[u8]) -> Result<FrontQuery, Refusal> {
        ck::prepare_query(
            &self.info,
            self.singlepass.as_ref(),
            self.whole,
            scheme,
            query,
        )?;
        Ok(FrontQuery {
            scheme,
            body: query.to_vec(),
        })
    }
    fn answer_batch(&self, prepared: Vec<FrontQuery>) -> Vec<Result<Vec<u8>, Refusal>> {
        let mut out: Vec<Option<Result<Vec<u8>, Refusal>>> = vec![None; prepared.len()];
        for &scheme in ck::Checklist::SCHEMES {
            let members: Vec<usize> = (0..prepared.len())
                .filter(|&i| prepared[i].scheme == scheme)
                .collect();
            // A shard's batch is never larger than what one client may send a whole server.
            for chunk in members.chunks(MAX_QUERIES_PER_REQUEST) {
                let queries: Vec<Vec<u8>> =
                    chunk.iter().map(|&i| prepared[i].body.clone()).collect();
                let answers = self.xor.answer_parts(
                    scheme,
                    &self.part_ids,
                    &queries,
                    self.max_answer(scheme),
                );
                match answers {
                    Ok(answers) => {
                        for (&i, answer) in chunk.iter().zip(answers) {
                            out[i] = Some(Ok(answer));
                        }
                    }
                    Err(error) => {
                        let refusal = error.refusal();
                        for &i in chunk {
                            out[i] = Some(Err(refusal.clone()));
                        }
                    }
                }
            }
        }
        out.into_iter()
            .map(|a| a.unwrap_or_else(|| Err(Refusal::internal("a query was not answered"))))
            .collect()
    }
    fn health(&self) -> String {
        self.xor.ops().health(&format!(
            "front checklist role={} list={} shards={}",
            self.info.role.name(),
            hex::encode(self.xor.map().database_id),
            self.xor.map().shards.len()
        ))
    }
    fn ready(&self) -> bool {
        self.xor.ops().ready()
    }
    fn metrics_text(&self) -> String {
        self.xor.ops().render()
    }
}
