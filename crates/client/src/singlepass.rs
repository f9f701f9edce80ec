//! SinglePass lookups for a [`crate::ChecklistSession`] opened with
//! [`crate::checklist::LookupScheme::SinglePass`]: the same two servers (a Safe Browsing deployment's
//! offline server 0 and online server 1, `pir_service::checklist`, which also answer
//! SinglePass over the same records), the SinglePass parameters following from the records
//! and their size (`pir_xor::singlepass::Params::new`).
//!
//! Privacy: as long as the two servers do not collude, neither learns the index
//! (`pir_xor::singlepass`). The state file holds the client's secret permutations: it is
//! written readable by the owner only.
//!
//! ```text
//! state file = "pir-singlepass-client-v1" | database id [32] | SinglePass state
//!              (pir_xor::singlepass::Client::encode_state)
//! ```

use std::path::Path;

use pir_core::SchemeId;
use pir_keys::PublicKey;
use pir_service::checklist::Info;
use pir_service::singlepass as service;
use pir_xor::singlepass::{Client, Params, Query};

use crate::exchange::{exchange, exchange_pair, Call};
use crate::transport::Transport;
use crate::SessionError;

/// First bytes of a saved SinglePass state file.
pub const STATE_MAGIC: &[u8] = b"pir-singlepass-client-v1";

/// The SinglePass layout of the records `info` describes.
pub fn params(info: &Info) -> Result<Params, SessionError> {
    Params::new(info.params.records(), info.params.record_bytes())
        .map_err(|e| SessionError::Setup(format!("no SinglePass layout for this database: {e}")))
}

/// The state file's bytes.
pub(crate) fn state_bytes(info: &Info, client: &Client) -> Vec<u8> {
    let mut bytes = STATE_MAGIC.to_vec();
    bytes.extend_from_slice(&info.database_id);
    bytes.extend(client.encode_state());
    bytes
}

/// The saved client, if `path` holds one for `info`'s database (anything else: `None`, and
/// the hints are fetched again).
pub(crate) fn load_state(path: &Path, info: &Info) -> Option<Client> {
    let bytes = std::fs::read(path).ok()?;
    let rest = bytes.strip_prefix(STATE_MAGIC)?;
    let (id, state) = rest.split_at_checked(32)?;
    if id != info.database_id {
        return None;
    }
    Client::decode_state(params(info).ok()?, state).ok()
}

/// The call to `server` for `info`'s database.
fn call(server: usize, key: PublicKey, info: &Info, params: &Params) -> Call {
    Call {
        server,
        scheme: SchemeId::SinglePass,
        database_id: info.database_id,
        key,
        max_answer: service::max_answer(params),
    }
}

/// Downloads the hints of a fresh seed from the offline server (one request: the server makes
/// them all in one pass).
pub(crate) async fn download_hints<T: Transport>(
    transport: &T,
    key: &PublicKey,
    info: &Info,
    progress: &mut (dyn FnMut(u64, u64) + Send),
) -> Result<Client, SessionError> {
    let params = params(info)?;
    let request = Client::offline_request(&mut rand::rng());
    progress(0, params.hint_bytes() as u64);
    let query = service::hints_query(&params, &request);
    let exchanged = exchange(transport, call(0, *key, info, &params), &[query])
        .await
        .map_err(|e| SessionError::from_exchange(0, e))?;
    // One query, so one answer: `exchange` checked the count.
    let hints = &exchanged.answers[0];
    progress(hints.len() as u64, params.hint_bytes() as u64);
    Client::new(params, &request, hints).map_err(|e| SessionError::bad_reply(0, e))
}

/// Sends a lookup's two messages at once (the online server's to server 1, the refresh to
/// server 0) and returns their answers in that order.
pub(crate) async fn exchange_lookup<T: Transport>(
    transport: &T,
    keys: &[PublicKey; 2],
    info: &Info,
    query: &Query,
) -> Result<(Vec<u8>, Vec<u8>), SessionError> {
    let params = params(info)?;
    exchange_pair(
        transport,
        [
            (
                call(1, keys[1], info, &params),
                vec![service::lookup_query(&params, &query.online)],
            ),
            (
                call(0, keys[0], info, &params),
                vec![service::lookup_query(&params, &query.refresh)],
            ),
        ],
        // One query, so one answer: `exchange` checked the count.
        |_, mut exchanged| Ok(exchanged.answers.swap_remove(0)),
    )
    .await
}
