//! A client of a two-server breach-check deployment ([`crate::service`]).
//!
//! [`BreachSession::open`] downloads each server's signed info (its position, the RAID-PIR
//! parameters, whether it holds the blinding key, and the application's database header) over
//! TLS pinned to the server's key, and checks that both servers serve the same database.
//! [`BreachSession::retrieve`] fetches one block privately with RAID-PIR and query-dependent
//! preprocessing (Günther 2019, section 3.3): a seed from each server, then one flip chunk to
//! each; [`BreachSession::blind`] runs the blinding step (section 4.3) on the server that
//! holds the key. Every answer's signature is checked before it is used.
//!
//! Privacy: as long as the two servers do not collude, neither learns which block was
//! fetched; the blinding server sees a uniformly random point. The header is opaque here:
//! the application decodes it.

use pir_client::{Call, HttpsTransport, SessionError, Transport};
use pir_core::{Codec, DbShape, SchemeId};
use pir_keys::PublicKey;
use pir_xor::qdp::QdpClient;

use crate::blind::{BlindRequest, WirePoint};
use crate::info::{Info, InfoReply, SERVERS};
use crate::service::{info_statement, POINT_BYTES};

/// Longest info reply accepted.
const MAX_INFO_REPLY: usize = 8192;

fn bad(server: usize, e: impl std::fmt::Display) -> SessionError {
    SessionError::bad_reply(server, e)
}

/// A session with the two servers of a deployment.
pub struct BreachSession<T = HttpsTransport> {
    transport: T,
    keys: Vec<PublicKey>,
    header: Vec<u8>,
    database_id: [u8; 32],
    client: QdpClient,
    blinding_server: Option<usize>,
}

impl<T> std::fmt::Debug for BreachSession<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BreachSession")
            .field("blinding_server", &self.blinding_server)
            .finish_non_exhaustive()
    }
}

impl BreachSession {
    /// Connects to `servers` (URL and pinned key, position 0 first) and reads their info.
    pub async fn open(servers: &[(String, PublicKey)]) -> Result<Self, SessionError> {
        if servers.len() != SERVERS {
            return Err(SessionError::Setup(format!(
                "a breach deployment has {SERVERS} servers, {} given",
                servers.len()
            )));
        }
        let transport = HttpsTransport::new(servers)
            .map_err(|source| SessionError::Transport { server: 0, source })?;
        let keys: Vec<PublicKey> = servers.iter().map(|(_, key)| *key).collect();
        BreachSession::open_with(transport, &keys).await
    }

    /// [`BreachSession::open`] for the database `id` (SHA-256 of its header, as `pir breach
    /// serve` prints it) of servers that serve several.
    pub async fn open_database(
        servers: &[(String, PublicKey)],
        id: [u8; 32],
    ) -> Result<Self, SessionError> {
        let transport = HttpsTransport::new(servers)
            .map_err(|source| SessionError::Transport { server: 0, source })?;
        let keys: Vec<PublicKey> = servers.iter().map(|(_, key)| *key).collect();
        BreachSession::open_database_with(transport, &keys, Some(id)).await
    }
}

impl<T: Transport> BreachSession<T> {
    /// [`BreachSession::open`] over any transport to the two servers, whose answers must be
    /// signed by `keys` (server 0 first).
    pub async fn open_with(transport: T, keys: &[PublicKey]) -> Result<Self, SessionError> {
        Self::open_database_with(transport, keys, None).await
    }

    /// [`BreachSession::open_with`] for the database `id` of servers that serve several;
    /// `None` is their default (first) database.
    pub async fn open_database_with(
        transport: T,
        keys: &[PublicKey],
        id: Option<[u8; 32]>,
    ) -> Result<Self, SessionError> {
        if keys.len() != SERVERS {
            return Err(SessionError::Setup(format!(
                "a breach deployment has {SERVERS} servers, {} given",
                keys.len()
            )));
        }
        let mut infos = Vec::with_capacity(SERVERS);
        for (server, key) in keys.iter().enumerate() {
            let reply = match &id {
                Some(id) => transport.hint_of(server, id, MAX_INFO_REPLY).await,
                None => transport.hint(server, MAX_INFO_REPLY).await,
            }
            .map_err(|source| SessionError::Transport { server, source })?;
            let reply = InfoReply::from_bytes(&reply, &())
                .map_err(|e| bad(server, format!("not a breach-check server's info: {e}")))?;
            key.verify(&info_statement(reply.info), &reply.signature)
                .map_err(|_| bad(server, "the info is not signed by the server's key"))?;
            let info = Info::decode(reply.info).map_err(|e| bad(server, e))?;
            if info.server != server {
                return Err(SessionError::Setup(format!(
                    "the server listed as number {server} says it is server {}; list server 0 \
                     first, then server 1",
                    info.server
                )));
            }
            infos.push(info);
        }
        let first = &infos[0];
        if infos.iter().any(|i| {
            (i.header.as_slice(), i.block_count, i.block_size, i.chunks)
                != (
                    first.header.as_slice(),
                    first.block_count,
                    first.block_size,
                    first.chunks,
                )
        }) {
            return Err(SessionError::Setup(
                "the two servers serve different databases".into(),
            ));
        }
        if id.is_some_and(|id| id != pir_keys::sha256(&first.header)) {
            return Err(bad(
                0,
                "the servers described another database than the one asked for",
            ));
        }
        if first.servers != SERVERS || first.redundancy != SERVERS {
            return Err(bad(0, "unsupported RAID-PIR parameters"));
        }
        let shape = DbShape::new(first.block_count, first.block_size).map_err(|e| bad(0, e))?;
        let raid = crate::service::scheme_for(shape).map_err(|e| bad(0, e))?;
        if raid.chunks() != first.chunks {
            return Err(bad(0, "unsupported RAID-PIR parameters"));
        }
        Ok(Self {
            transport,
            keys: keys.to_vec(),
            database_id: pir_keys::sha256(&first.header),
            header: first.header.clone(),
            client: QdpClient::new(raid),
            blinding_server: infos.iter().position(|i| i.blinding),
        })
    }

    /// The application's database header, as both servers sent it.
    pub fn header(&self) -> &[u8] {
        &self.header
    }

    /// The position of the server that answers blinded requests, if any.
    pub fn blinding_server(&self) -> Option<usize> {
        self.blinding_server
    }

    /// The QDP client of this deployment's parameters.
    pub fn qdp(&self) -> &QdpClient {
        &self.client
    }

    /// Sends `message` (a QDP or blinded message body) to `server` and returns its answer
    /// once the reply checks ([`pir_client::exchange()`]: envelope, signature, database id).
    pub async fn exchange(&self, server: usize, message: &[u8]) -> Result<Vec<u8>, SessionError> {
        let key = *self
            .keys
            .get(server)
            .ok_or_else(|| SessionError::Setup(format!("no server number {server}")))?;
        let call = Call {
            server,
            scheme: SchemeId::Qdp,
            database_id: self.database_id,
            key,
            max_answer: self
                .client
                .scheme()
                .answer_body_len(server)
                .max(pir_xor::qdp::SEED_RESPONSE_LEN)
                .max(POINT_BYTES),
        };
        let mut exchanged = pir_client::exchange(&self.transport, call, &[message.to_vec()])
            .await
            .map_err(|e| SessionError::from_exchange(server, e))?;
        // One query, so one answer: `exchange` checked the count.
        Ok(exchanged.answers.swap_remove(0))
    }

    /// Fetches block `index` privately: a seed from each server, then each server's flip
    /// chunk; returns the block.
    pub async fn retrieve(&self, index: usize) -> Result<Vec<u8>, SessionError> {
        let client = &self.client;
        let seed_request = |s: usize| client.seed_request(s).map_err(|e| bad(s, e));
        let (r0, r1) = (seed_request(0)?, seed_request(1)?);
        let (g0, g1) = tokio::try_join!(self.exchange(0, &r0), self.exchange(1, &r1))?;
        let grants = [
            client.read_seed_response(0, &g0).map_err(|e| bad(0, e))?,
            client.read_seed_response(1, &g1).map_err(|e| bad(1, e))?,
        ];
        let (queries, state) = client
            .query(&[index], &grants)
            .map_err(|e| SessionError::Setup(e.to_string()))?;
        let (q0, q1) = (
            client.encode_query(&queries[0]),
            client.encode_query(&queries[1]),
        );
        let (a0, a1) = tokio::try_join!(self.exchange(0, &q0), self.exchange(1, &q1))?;
        let answers = [
            client.decode_answer(0, &a0).map_err(|e| bad(0, e))?,
            client.decode_answer(1, &a1).map_err(|e| bad(1, e))?,
        ];
        let mut blocks = client.decode(&state, &answers).map_err(|e| bad(0, e))?;
        blocks
            .pop()
            .ok_or_else(|| bad(0, "the answers decoded to no block"))
    }

    /// The blinding step: sends a blinded point to the server that holds the key and returns
    /// its (still blinded) answer point.
    pub async fn blind(&self, point: &[u8; POINT_BYTES]) -> Result<Vec<u8>, SessionError> {
        let server = self.blinding_server.ok_or_else(|| {
            SessionError::Setup(
                "neither server holds the blinding key: start one with --blinding-key".into(),
            )
        })?;
        let point = WirePoint::from_bytes(point, &())
            .map_err(|e| SessionError::Setup(format!("the blinded point to send: {e}")))?;
        let message = BlindRequest(point).to_bytes();
        let answer = self.exchange(server, &message).await?;
        if answer.len() != POINT_BYTES {
            return Err(bad(server, "a blinded answer is one 32-byte point"));
        }
        Ok(answer)
    }
}
