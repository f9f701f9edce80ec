//! What one lookup of a load run is, per kind of server, and how it is made.
//!
//! Most servers answer a query the same way however often it comes, so a lookup is made once
//! by the real client code, recorded as it leaves, and replayed ([`Lookup`]: stages of
//! requests, the requests of one stage sent at once, one stage after the other, as the client
//! sent them). A Safe Browsing lookup is what the proxy sends for one hash prefix: for every
//! bucket of the list, `max_per_prefix` private lookups (Checklist, SinglePass or DPF), each a
//! pair of requests to both servers.
//!
//! A breach server's QDP seeds are single use, so a replayed query is refused: breach lookups
//! are made live, each a whole check through [`BreachSession`] (a seed from each server, then
//! each server's flip chunk), for a fresh random password on a password corpus, or a random
//! bucket on a username:password corpus (the blinding step is left out there: its Argon2id
//! hash would make the load generator, not the servers, the bottleneck).

use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use pir_breach::check::{self, Credential};
use pir_breach::header::DbHeader;
use pir_breach::BreachSession;
use pir_client::{ChecklistSession, HttpsTransport, LookupScheme, Tap, Transport};
use pir_core::wire::{self, MessageKind};
use pir_core::MultiServerScheme;
use pir_keys::PublicKey;
use rand::Rng;

/// One recorded lookup: stages sent one after the other, each `(server, request envelope)`s
/// sent at once.
pub type Lookup = Vec<Vec<(usize, Vec<u8>)>>;

/// The work of a load run.
#[derive(Clone)]
pub enum Work {
    /// Recorded lookups, replayed in turn.
    Replay(Arc<Vec<Lookup>>),
    /// Live credential checks against a breach deployment.
    Breach(Arc<DbHeader>),
}

impl std::fmt::Debug for Work {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Work::Replay(lookups) => write!(f, "Replay({} lookups)", lookups.len()),
            Work::Breach(_) => f.write_str("Breach"),
        }
    }
}

/// Whether `reply` is an answer envelope (not an error).
pub(super) fn is_answer(reply: &[u8]) -> bool {
    wire::decode_envelope(reply, reply.len()).is_ok_and(|e| e.kind == MessageKind::Answer)
}

/// What a reply that is not an answer says, in words.
pub(super) fn refusal_of(reply: &[u8]) -> String {
    match wire::decode_envelope(reply, reply.len()) {
        Ok(e) if e.kind == MessageKind::Error => wire::decode_error(e.body)
            .map(|(_, m)| format!("refused: {m}"))
            .unwrap_or_else(|_| "an error envelope".into()),
        _ => "a reply that is not an answer".into(),
    }
}

/// One way to reach the servers for lookups: a transport to all of them, and for breach
/// checks a session on it.
pub(super) enum Client {
    /// Replays over a transport.
    Replay(HttpsTransport),
    /// Checks over a session.
    Breach(Box<BreachSession<HttpsTransport>>),
}

impl Client {
    /// Opens a client of `servers` for `work`.
    pub(super) async fn open(servers: &[(String, PublicKey)], work: &Work) -> Result<Client> {
        Ok(match work {
            Work::Replay(_) => Client::Replay(HttpsTransport::new(servers)?),
            Work::Breach(_) => Client::Breach(Box::new(
                BreachSession::open(servers)
                    .await
                    .context("opening a breach session")?,
            )),
        })
    }

    /// Makes lookup number `k` of `work`; `Err` says why it was not served.
    pub(super) async fn lookup(&self, work: &Work, k: usize, max_reply: usize) -> Result<()> {
        match (self, work) {
            (Client::Replay(transport), Work::Replay(lookups)) => {
                let lookup = &lookups[k % lookups.len()];
                let send = |(server, request): &(usize, Vec<u8>)| {
                    transport.exchange(*server, request.clone(), max_reply)
                };
                for stage in lookup {
                    let replies = match stage.as_slice() {
                        [a, b] => {
                            let (a, b) = tokio::join!(send(a), send(b));
                            vec![a, b]
                        }
                        // [`stages`] puts at most one request per server in a stage: one here.
                        _ => {
                            let mut replies = Vec::with_capacity(stage.len());
                            for request in stage {
                                replies.push(send(request).await);
                            }
                            replies
                        }
                    };
                    for reply in replies {
                        let reply = reply?;
                        if !is_answer(&reply) {
                            bail!("{}", refusal_of(&reply));
                        }
                    }
                }
                Ok(())
            }
            (Client::Breach(session), Work::Breach(header)) => breach_lookup(session, header).await,
            _ => bail!("a client of another kind of work"),
        }
    }
}

/// One live check: a random password on a password corpus, a random bucket otherwise.
async fn breach_lookup(session: &BreachSession<HttpsTransport>, header: &DbHeader) -> Result<()> {
    let (password, bucket) = {
        let mut rng = rand::rng();
        let password: [u8; 12] = rng.random();
        let blocks = session.qdp().scheme().shape().block_count();
        (hex::encode(password), rng.random_range(0..blocks) as usize)
    };
    if header.corpus.is_sha1() {
        check::check(session, header, Credential::Password(password.as_bytes())).await?;
    } else {
        session.retrieve(bucket).await?;
    }
    Ok(())
}

/// The breach deployment at `servers` (server 0 first): its header, and what it is.
pub(super) async fn breach_work(servers: &[(String, PublicKey)]) -> Result<(Work, String)> {
    let (session, header) = check::connect(servers)
        .await
        .context("connecting to the breach servers")?;
    let shape = session.qdp().scheme().shape();
    let what = format!(
        "breach servers, {} corpus: {} buckets of {} B, QDP checks ({})",
        header.corpus.name(),
        shape.block_count(),
        shape.block_size(),
        if header.corpus.is_sha1() {
            "a random password each"
        } else {
            "a random bucket each, without the blinding step"
        }
    );
    Ok((Work::Breach(Arc::new(header)), what))
}

/// Splits recorded `(server, request)`s into stages: a new stage starts where a server
/// repeats (the client sends to each server at most once per stage).
pub fn stages(requests: Vec<(usize, Vec<u8>)>) -> Lookup {
    let mut stages: Lookup = Vec::new();
    for (server, request) in requests {
        match stages.last_mut() {
            Some(stage) if !stage.iter().any(|(s, _)| *s == server) => {
                stage.push((server, request))
            }
            _ => stages.push(vec![(server, request)]),
        }
    }
    stages
}

/// Recorded Safe Browsing lookups: `count` lookups of one hash prefix each, as the proxy
/// makes them with `scheme` (buckets below the list's DPF size by DPF), and what they are.
pub(super) async fn safebrowsing_work(
    servers: &[(String, PublicKey)],
    scheme: LookupScheme,
    count: usize,
) -> Result<(Work, String)> {
    if servers.len() != 2 {
        bail!("a Safe Browsing load test needs both servers: --server for server 0, then 1");
    }
    let keys = [servers[0].1, servers[1].1];
    let https = Arc::new(HttpsTransport::new(servers)?);
    let download = https
        .hint(0, pir_safebrowsing::local::MAX_INDEX_BYTES + 64)
        .await
        .context("downloading the list index from server 0")?;
    let index = pir_service::checklist::parse_download(&download)
        .map_err(anyhow::Error::msg)
        .and_then(|bytes| pir_safebrowsing::ListIndex::decode(bytes).map_err(anyhow::Error::msg))
        .context("the list index of server 0")?;
    // What the proxy sends each server: (server position, request body).
    type Sent = Vec<(usize, Vec<u8>)>;
    let log: Arc<Mutex<Sent>> = Arc::default();
    let mut sessions = Vec::new();
    for bucket in index.buckets() {
        let dpf = scheme == LookupScheme::Dpf || bucket.len() < index.dpf_below();
        let tap_log = log.clone();
        let tap = Tap::new(https.clone(), move |server, request, _, _| {
            if wire::decode_envelope(request, request.len())
                .is_ok_and(|e| e.kind == MessageKind::Query)
            {
                let mut log = tap_log.lock().unwrap_or_else(|p| p.into_inner());
                log.push((server, request.to_vec()));
            }
        });
        let session = ChecklistSession::open_lookups_with(
            tap,
            keys,
            Some(&bucket.database_id),
            None,
            if dpf { LookupScheme::Dpf } else { scheme },
            &mut |_, _| {},
        )
        .await
        .with_context(|| format!("opening bucket {} of the list", bucket.id))?;
        sessions.push((session, bucket.len() as u64, bucket.max_per_prefix().max(1)));
    }
    // Hint downloads and info requests are not lookups.
    log.lock().unwrap_or_else(|p| p.into_inner()).clear();
    let mut lookups = Vec::with_capacity(count);
    let mut rng = rand::rng();
    for _ in 0..count {
        for (session, records, per_prefix) in &mut sessions {
            for _ in 0..*per_prefix {
                let position = rng.random_range(0..*records);
                if session.has_hints() {
                    session.fetch(position).await?;
                } else {
                    session.fetch_dpf(position).await?;
                }
            }
        }
        let sent = std::mem::take(&mut *log.lock().unwrap_or_else(|p| p.into_inner()));
        lookups.push(stages(sent));
    }
    let requests: usize = lookups[0].iter().map(Vec::len).sum();
    let what = format!(
        "Safe Browsing servers, list of {} full hashes in {} bucket(s), {:?} lookups \
         ({requests} requests per prefix)",
        index.records(),
        index.buckets().len(),
        scheme
    );
    Ok((Work::Replay(Arc::new(lookups)), what))
}
