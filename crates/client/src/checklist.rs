//! A client of a Checklist deployment (`pir_service::checklist`): server 0 is the offline
//! server (hints and refreshes), server 1 the online server (lookups).
//!
//! [`ChecklistSession::open`] asks both servers what they hold (the same database, one in each
//! role), then loads the client's saved state if it belongs to that database, or downloads the
//! hints from the offline server in pieces (`progress(done, total)` follows them) and saves
//! the state. [`ChecklistSession::fetch`] sends one punctured set to each server at once,
//! checks both signed replies, and repeats on decoy rounds; the state is saved again after each
//! lookup, so a restart never reuses a set.
//!
//! Privacy: as long as the two servers do not collude, neither learns the index
//! (`pir_xor::checklist`). The state file holds the client's secret sets: it is written
//! readable by the owner only.
//!
//! ```text
//! state file = "pir-checklist-client-v1" | database id [32] | Checklist state
//!              (pir_xor::checklist::Client::encode_state)
//! ```

use std::path::{Path, PathBuf};

use pir_core::wire::{self, MessageKind};
use pir_core::{DbShape, MultiServerScheme, SchemeId};
use pir_keys::PublicKey;
use pir_service::checklist::{self as service, Info, Role};
use pir_xor::checklist::{Client, Outcome};
use pir_xor::DpfPir;

use crate::exchange::{exchange, exchange_pair, Call};
use crate::singlepass;
use crate::transport::{single_server_transport, HttpsTransport, Transport};
use crate::SessionError;

/// First bytes of a saved client state file.
pub const STATE_MAGIC: &[u8] = b"pir-checklist-client-v1";
/// Largest info reply accepted.
const MAX_INFO_REPLY: usize = service::MAX_ABOUT_BYTES + 4096;
/// Rounds after which a lookup gives up (a decoy round has probability about `s / 2B`; many
/// in a row mean a broken client or server).
const MAX_ROUNDS: usize = 64;

/// How a session looks records up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupScheme {
    /// Checklist: punctured sets, hints kept in the state file.
    Checklist,
    /// SinglePass: one offset per row to each server, hints kept in the state file.
    SinglePass,
    /// DPF: a key to each server, no hints.
    Dpf,
}

/// A session with both servers: their info, the client's hints and where they are saved.
pub struct ChecklistSession<T = HttpsTransport> {
    transport: T,
    keys: [PublicKey; 2],
    info: Info,
    /// `None` for a session opened for DPF lookups only.
    client: Option<Client>,
    /// A session opened for SinglePass lookups: its client (and no Checklist one).
    singlepass: Option<pir_xor::singlepass::Client>,
    state_path: Option<PathBuf>,
    hints_downloaded: bool,
}

impl<T> std::fmt::Debug for ChecklistSession<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChecklistSession")
            .field("params", &self.info.params)
            .finish_non_exhaustive()
    }
}

fn bad(server: usize) -> impl Fn(pir_core::Error) -> SessionError {
    move |e| SessionError::bad_reply(server, e)
}

impl ChecklistSession {
    /// Connects to both servers (`(URL, key)`: the offline server first), pinned to their keys.
    pub async fn open(
        servers: &[(String, PublicKey); 2],
        state_path: Option<&Path>,
        progress: &mut (dyn FnMut(u64, u64) + Send),
    ) -> Result<ChecklistSession, SessionError> {
        let transport = single_server_transport(servers).map_err(SessionError::transport(0))?;
        ChecklistSession::open_with(
            transport,
            [servers[0].1, servers[1].1],
            state_path,
            progress,
        )
        .await
    }
}

impl ChecklistSession {
    /// [`ChecklistSession::open_database_with`] over HTTPS.
    pub async fn open_database(
        servers: &[(String, PublicKey); 2],
        database: &[u8; 32],
        state_path: Option<&Path>,
        dpf_only: bool,
        progress: &mut (dyn FnMut(u64, u64) + Send),
    ) -> Result<ChecklistSession, SessionError> {
        let transport = single_server_transport(servers).map_err(SessionError::transport(0))?;
        ChecklistSession::open_database_with(
            transport,
            [servers[0].1, servers[1].1],
            Some(database),
            state_path,
            dpf_only,
            progress,
        )
        .await
    }

    /// Connects to both servers for DPF lookups only ([`ChecklistSession::fetch_dpf`]).
    pub async fn open_dpf(
        servers: &[(String, PublicKey); 2],
    ) -> Result<ChecklistSession, SessionError> {
        let transport = single_server_transport(servers).map_err(SessionError::transport(0))?;
        ChecklistSession::open_dpf_with(transport, [servers[0].1, servers[1].1]).await
    }
}

impl<T: Transport> ChecklistSession<T> {
    /// [`ChecklistSession::open`] over any transport (server 0 offline, server 1 online).
    pub async fn open_with(
        transport: T,
        keys: [PublicKey; 2],
        state_path: Option<&Path>,
        progress: &mut (dyn FnMut(u64, u64) + Send),
    ) -> Result<Self, SessionError> {
        Self::open_database_with(transport, keys, None, state_path, false, progress).await
    }

    /// A session for DPF lookups only ([`ChecklistSession::fetch_dpf`]): no hints, no state.
    pub async fn open_dpf_with(transport: T, keys: [PublicKey; 2]) -> Result<Self, SessionError> {
        Self::open_database_with(transport, keys, None, None, true, &mut |_, _| {}).await
    }

    /// A session for database `database` of servers that serve several (one Checklist
    /// database per bucket of a changing list, behind `pir_service::ReleaseSet`), or for the
    /// one they serve (`None`). `dpf_only`: no hints, lookups with
    /// [`ChecklistSession::fetch_dpf`] only.
    pub async fn open_database_with(
        transport: T,
        keys: [PublicKey; 2],
        database: Option<&[u8; 32]>,
        state_path: Option<&Path>,
        dpf_only: bool,
        progress: &mut (dyn FnMut(u64, u64) + Send),
    ) -> Result<Self, SessionError> {
        let lookups = if dpf_only {
            LookupScheme::Dpf
        } else {
            LookupScheme::Checklist
        };
        Self::open_lookups_with(transport, keys, database, state_path, lookups, progress).await
    }

    /// [`ChecklistSession::open_database_with`] for lookups by `lookups`: Checklist or
    /// SinglePass hints (from `state_path` or downloaded), or DPF with no hints.
    pub async fn open_lookups_with(
        transport: T,
        keys: [PublicKey; 2],
        database: Option<&[u8; 32]>,
        state_path: Option<&Path>,
        lookups: LookupScheme,
        progress: &mut (dyn FnMut(u64, u64) + Send),
    ) -> Result<Self, SessionError> {
        let info = deployment_info(&transport, database).await?;
        let mut session = Self {
            transport,
            keys,
            info,
            client: None,
            singlepass: None,
            state_path: None,
            hints_downloaded: false,
        };
        match lookups {
            LookupScheme::Dpf => return Ok(session),
            LookupScheme::SinglePass => {
                session.state_path = state_path.map(Path::to_path_buf);
                let info = &session.info;
                let saved = state_path.and_then(|path| singlepass::load_state(path, info));
                session.hints_downloaded = saved.is_none();
                let client = match saved {
                    Some(client) => client,
                    None => {
                        let (transport, key) = (&session.transport, &session.keys[0]);
                        singlepass::download_hints(transport, key, info, progress).await?
                    }
                };
                session.singlepass = Some(client);
                session.save()?;
                return Ok(session);
            }
            LookupScheme::Checklist => {}
        }
        let (transport, keys, info) = (session.transport, session.keys, session.info);
        let saved = state_path.and_then(|path| load_state(path, &info));
        let hints_downloaded = saved.is_none();
        let client = match saved {
            Some(client) => client,
            None => download_hints(&transport, &keys[0], &info, progress).await?,
        };
        let session = Self {
            transport,
            keys,
            info,
            client: Some(client),
            singlepass: None,
            state_path: state_path.map(Path::to_path_buf),
            hints_downloaded,
        };
        session.save()?;
        Ok(session)
    }

    /// What the offline server says about itself (parameters, database id, application data).
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// True when this session has hints (false: opened for DPF lookups only).
    pub fn has_hints(&self) -> bool {
        self.client.is_some() || self.singlepass.is_some()
    }

    /// How this session looks records up.
    pub fn lookups(&self) -> LookupScheme {
        match (&self.client, &self.singlepass) {
            (Some(_), _) => LookupScheme::Checklist,
            (None, Some(_)) => LookupScheme::SinglePass,
            (None, None) => LookupScheme::Dpf,
        }
    }

    /// True when this session downloaded its hints (false: loaded from the state file).
    pub fn hints_downloaded(&self) -> bool {
        self.hints_downloaded
    }

    /// Writes the state file (a no-op without one).
    pub fn save(&self) -> Result<(), SessionError> {
        let Some(path) = &self.state_path else {
            return Ok(());
        };
        let bytes = match (&self.client, &self.singlepass) {
            (Some(client), _) => {
                let mut bytes = STATE_MAGIC.to_vec();
                bytes.extend_from_slice(&self.info.database_id);
                bytes.extend(client.encode_state());
                bytes
            }
            (None, Some(client)) => singlepass::state_bytes(&self.info, client),
            (None, None) => return Ok(()),
        };
        let cache = |source| SessionError::Cache {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(cache)?;
        }
        pir_fs::write_atomic_private(path, &bytes).map_err(cache)
    }

    /// Fetches record `index` privately; saves the state afterwards.
    pub async fn fetch(&mut self, index: u64) -> Result<Vec<u8>, SessionError> {
        let records = self.info.params.records();
        if index >= records {
            return Err(SessionError::Request(format!(
                "record {index} does not exist: the database has {records} records"
            )));
        }
        if let Some(client) = self.singlepass.as_mut() {
            let (transport, keys, info) = (&self.transport, &self.keys, &self.info);
            let (query, pending) = client
                .query(index, &mut rand::rng())
                .map_err(|e| SessionError::Request(e.to_string()))?;
            // The columns are swapped from here on: keep that, whatever happens next.
            self.save()?;
            let answers = singlepass::exchange_lookup(transport, keys, info, &query).await;
            let client = self.singlepass.as_mut().ok_or_else(|| {
                SessionError::Request("this session has no SinglePass hints".into())
            })?;
            let (online, refresh) = answers?;
            let record = client
                .finish(pending, &online, &refresh)
                .map_err(|e| SessionError::bad_reply(1, e))?;
            self.save()?;
            return Ok(record);
        }
        let params = self.info.params;
        let max_answer = service::max_answer(&params);
        let id = self.info.database_id;
        for _ in 0..MAX_ROUNDS {
            let client = self.client.as_mut().ok_or_else(|| {
                SessionError::Request("this session was opened for DPF lookups only".into())
            })?;
            let (query, pending) = client
                .query(index, &mut rand::rng())
                .map_err(|e| SessionError::Request(e.to_string()))?;
            // The set is used up from here on: keep that, whatever happens next.
            self.save()?;
            let call = |server: usize| Call {
                server,
                scheme: SchemeId::Checklist,
                database_id: id,
                key: self.keys[server],
                max_answer,
            };
            let (a, r) = exchange_pair(
                &self.transport,
                [
                    (call(1), vec![service::lookup_query(&params, &query.online)]),
                    (
                        call(0),
                        vec![service::lookup_query(&params, &query.refresh)],
                    ),
                ],
                // One query, so one answer: `exchange` checked the count.
                |_, mut exchanged| Ok(exchanged.answers.swap_remove(0)),
            )
            .await?;
            let client = self.client.as_mut().ok_or_else(|| {
                SessionError::Request("this session was opened for DPF lookups only".into())
            })?;
            let outcome = client
                .finish(pending, &a, &r)
                .map_err(|e| SessionError::bad_reply(1, e))?;
            self.save()?;
            if let Outcome::Record(record) = outcome {
                return Ok(record);
            }
        }
        Err(SessionError::Setup(format!(
            "{MAX_ROUNDS} decoy rounds in a row: something is wrong with this client"
        )))
    }
}

impl<T: Transport> ChecklistSession<T> {
    /// Fetches record `index` privately with two-server DPF PIR (`pir_xor::dpf_pir`): a DPF
    /// key to each server, each reads every record; no hints are used or changed.
    pub async fn fetch_dpf(&self, index: u64) -> Result<Vec<u8>, SessionError> {
        let params = self.info.params;
        if index >= params.records() {
            return Err(SessionError::Request(format!(
                "record {index} does not exist: the database has {} records",
                params.records()
            )));
        }
        let shape = DbShape::new(params.records(), params.record_bytes())
            .map_err(|e| SessionError::Request(e.to_string()))?;
        let dpf = DpfPir::new(shape);
        let (queries, state) = dpf
            .query(&[index as usize], &mut rand::rng())
            .map_err(|e| SessionError::Request(e.to_string()))?;
        let call = |server: usize| {
            let call = Call {
                server,
                scheme: SchemeId::Dpf,
                database_id: self.info.database_id,
                key: self.keys[server],
                max_answer: dpf.max_answer_body(),
            };
            (call, vec![dpf.encode_query(&queries[server])])
        };
        // Position in the pair = server, so `queries[server]` is what that server was sent.
        let (a, b) = exchange_pair(&self.transport, [call(0), call(1)], |server, exchanged| {
            dpf.decode_answer(&queries[server], &exchanged.answers[0])
                .map_err(|e| SessionError::bad_reply(server, e))
        })
        .await?;
        let mut blocks = dpf
            .decode(&state, &[a, b])
            .map_err(|e| SessionError::bad_reply(1, e))?;
        let mut record = blocks.pop().unwrap_or_default();
        record.truncate(params.record_bytes());
        Ok(record)
    }
}

/// Both servers' info, checked: roles 0 offline and 1 online, one database (`database`, if
/// given).
async fn deployment_info<T: Transport>(
    transport: &T,
    database: Option<&[u8; 32]>,
) -> Result<Info, SessionError> {
    let mut infos = Vec::with_capacity(2);
    let body: &[u8] = database.map_or(&[], |id| id.as_slice());
    for server in 0..2 {
        let request = wire::encode_envelope(SchemeId::Control, MessageKind::ManifestRequest, body);
        let reply = transport
            .exchange(server, request, MAX_INFO_REPLY)
            .await
            .map_err(SessionError::transport(server))?;
        let envelope = wire::decode_envelope(&reply, MAX_INFO_REPLY).map_err(bad(server))?;
        if envelope.kind == MessageKind::Error {
            let (code, message) = wire::decode_error(envelope.body).map_err(bad(server))?;
            return Err(SessionError::Refused {
                server,
                code,
                message,
            });
        }
        infos.push(service::parse_description(&reply).map_err(bad(server))?);
    }
    let (offline, online) = (&infos[0], &infos[1]);
    if offline.role != Role::Offline || online.role != Role::Online {
        return Err(SessionError::Setup(
            "server 0 must be the offline server and server 1 the online server \
             (`pir safebrowsing serve --server 0` and `--server 1`)"
                .into(),
        ));
    }
    if offline.database_id != online.database_id || offline.params != online.params {
        return Err(SessionError::Setup(
            "the two servers hold different databases; serve the same database file on both".into(),
        ));
    }
    if database.is_some_and(|id| *id != infos[0].database_id) {
        return Err(SessionError::bad_reply(
            0,
            "the servers describe another database than the one asked for",
        ));
    }
    Ok(infos.swap_remove(0))
}

/// The saved client, if `path` holds one for `info`'s database (anything else: `None`, and
/// the hints are fetched again).
fn load_state(path: &Path, info: &Info) -> Option<Client> {
    let bytes = std::fs::read(path).ok()?;
    let rest = bytes.strip_prefix(STATE_MAGIC)?;
    let (id, state) = rest.split_at_checked(32)?;
    if id != info.database_id {
        return None;
    }
    Client::decode_state(info.params, state).ok()
}

/// Downloads every hint from the offline server, in pieces.
async fn download_hints<T: Transport>(
    transport: &T,
    key: &PublicKey,
    info: &Info,
    progress: &mut (dyn FnMut(u64, u64) + Send),
) -> Result<Client, SessionError> {
    let params = info.params;
    let request = Client::offline_request(&mut rand::rng());
    let per = service::hints_per_request(&params);
    let total = params.hints() as u32;
    let call = Call {
        server: 0,
        scheme: SchemeId::Checklist,
        database_id: info.database_id,
        key: *key,
        max_answer: service::max_answer(&params),
    };
    let mut hints = Vec::with_capacity(params.hint_bytes());
    let mut first = 0u32;
    progress(0, params.hint_bytes() as u64);
    while first < total {
        let count = per.min(total - first);
        let exchanged = exchange(
            transport,
            call,
            &[service::hints_query(&params, &request, first, count)],
        )
        .await
        .map_err(|e| SessionError::from_exchange(0, e))?;
        // One query, so one answer: `exchange` checked the count.
        let answers = &exchanged.answers;
        if answers[0].len() != count as usize * params.record_bytes() {
            return Err(SessionError::bad_reply(
                0,
                format!("{} bytes of hints for {count} sets", answers[0].len()),
            ));
        }
        hints.extend_from_slice(&answers[0]);
        first += count;
        progress(hints.len() as u64, params.hint_bytes() as u64);
    }
    Client::new(params, &request, &hints).map_err(|e| SessionError::bad_reply(0, e))
}
