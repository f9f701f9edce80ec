//! The client's one call sequence: build a request envelope, send it to one server through a
//! [`Transport`], check the reply ([`pir_service::reply::open`]: envelope, kind, signature over
//! the exact request, database id, answer count) and hand back the answer bodies.
//!
//! Every session and the multi-server retrieval go through [`exchange`] ([`resend`] to send
//! a spare the exact request another server was sent, [`exchange_pair`] for the two servers of
//! a pair at once). Decoding the answer bodies stays with the caller:
//! only it knows the scheme's answer type and which server to blame for one that is wrong.

use pir_core::SchemeId;
use pir_keys::PublicKey;
use pir_service::framing;
use pir_service::reply::{self, Expect, ReplyError};

use crate::{SessionError, Transport, TransportError};

/// One request to one server: where it goes and what its reply must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// The server's position in the transport's list.
    pub server: usize,
    /// The scheme of the queries (and of the answer envelope).
    pub scheme: SchemeId,
    /// The database (release) the request names and the signed answer must name.
    pub database_id: [u8; 32],
    /// The key the server signs its answers with.
    pub key: PublicKey,
    /// Longest answer body one query may produce; bounds the reply.
    pub max_answer: usize,
}

/// A reply that checked, with the bytes it was checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchanged {
    /// The request envelope sent.
    pub request: Vec<u8>,
    /// The server's reply envelope, signed over `request`.
    pub reply: Vec<u8>,
    /// The answer bodies, one per query, in query order.
    pub answers: Vec<Vec<u8>>,
}

/// Why [`exchange`] returned no answers. Both variants keep the request (its size counts as
/// sent); a reply that came keeps its bytes too, the server's evidence when it signed
/// something wrong ([`ReplyError::Signed`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExchangeError {
    /// No reply: the transport failed.
    #[error("{source}")]
    Transport {
        /// The request envelope that was to be sent.
        request: Vec<u8>,
        /// What failed.
        source: TransportError,
    },
    /// The reply did not check.
    #[error("{error}")]
    Reply {
        /// The request envelope sent.
        request: Vec<u8>,
        /// The reply envelope received.
        reply: Vec<u8>,
        /// What is wrong with it.
        error: ReplyError,
    },
}

/// Sends `queries` (scheme query bodies) to `call.server` in one request and returns the
/// answer bodies once the reply checks against `call`.
pub async fn exchange<T: Transport>(
    transport: &T,
    call: Call,
    queries: &[Vec<u8>],
) -> Result<Exchanged, ExchangeError> {
    let request = reply::request(call.scheme, &call.database_id, queries);
    resend(transport, call, request, queries.len()).await
}

/// [`exchange`] of a request built before: `request`, the exact bytes another server was
/// sent (`count` queries, for `call.database_id`), goes to `call.server`, whose reply must
/// check against `call`. A retrieval asks a spare this way to find which mirror lied.
pub async fn resend<T: Transport>(
    transport: &T,
    call: Call,
    request: Vec<u8>,
    count: usize,
) -> Result<Exchanged, ExchangeError> {
    let limit = framing::reply_bytes(count, call.max_answer);
    let reply = match transport
        .exchange(call.server, request.clone(), limit)
        .await
    {
        Ok(reply) => reply,
        Err(source) => return Err(ExchangeError::Transport { request, source }),
    };
    let expect = Expect {
        scheme: call.scheme,
        database_id: &call.database_id,
        key: &call.key,
        count,
        max_answer: call.max_answer,
    };
    let answers = match reply::open(&reply, &request, expect) {
        Ok(answers) => answers.into_iter().map(<[u8]>::to_vec).collect(),
        Err(error) => {
            return Err(ExchangeError::Reply {
                request,
                reply,
                error,
            })
        }
    };
    Ok(Exchanged {
        request,
        reply,
        answers,
    })
}

/// [`exchange`] with two servers at once (each `(call, queries)`), then
/// `decode(position, exchanged)` on each reply, `position` being its place in `calls`.
///
/// Which failure is reported when several happen: first a transport failure, in the order of
/// `calls`; then, in that order, each server's reply check followed by its `decode`.
pub async fn exchange_pair<T: Transport, A>(
    transport: &T,
    calls: [(Call, Vec<Vec<u8>>); 2],
    mut decode: impl FnMut(usize, Exchanged) -> Result<A, SessionError>,
) -> Result<(A, A), SessionError> {
    let [(first, first_queries), (second, second_queries)] = calls;
    let (first_result, second_result) = tokio::join!(
        exchange(transport, first, &first_queries),
        exchange(transport, second, &second_queries)
    );
    for (call, result) in [(&first, &first_result), (&second, &second_result)] {
        if let Err(ExchangeError::Transport { source, .. }) = result {
            return Err(SessionError::Transport {
                server: call.server,
                source: source.clone(),
            });
        }
    }
    let first_answer = first_result
        .map_err(|e| SessionError::from_exchange(first.server, e))
        .and_then(|exchanged| decode(0, exchanged))?;
    let second_answer = second_result
        .map_err(|e| SessionError::from_exchange(second.server, e))
        .and_then(|exchanged| decode(1, exchanged))?;
    Ok((first_answer, second_answer))
}

// Here rather than in `error.rs`, so that the error module does not depend on this one.
impl SessionError {
    /// What a failed [`crate::exchange()`] with `server` means: unreachable, or
    /// [`SessionError::from_reply`].
    pub fn from_exchange(server: usize, error: ExchangeError) -> Self {
        match error {
            ExchangeError::Transport { source, .. } => SessionError::Transport { server, source },
            ExchangeError::Reply { error, .. } => SessionError::from_reply(server, error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pir_core::wire::{self, MessageKind};
    use pir_keys::SecretKey;

    const ID: [u8; 32] = [3; 32];

    /// What a test server does with a request.
    #[derive(Clone, Copy, PartialEq)]
    enum Behaviour {
        /// Answers each query with its bytes reversed, signed.
        Honest,
        /// Cannot be reached.
        Down,
        /// Signs an answer for another database.
        OtherDatabase,
    }

    /// Servers that sign with their own key and behave as told.
    struct Servers {
        keys: Vec<SecretKey>,
        behaviour: Vec<Behaviour>,
    }

    impl Servers {
        fn new(behaviour: &[Behaviour]) -> Self {
            Self {
                keys: behaviour
                    .iter()
                    .map(|_| SecretKey::generate().unwrap())
                    .collect(),
                behaviour: behaviour.to_vec(),
            }
        }

        fn call(&self, server: usize) -> Call {
            Call {
                server,
                scheme: SchemeId::Chor,
                database_id: ID,
                key: self.keys[server].public(),
                max_answer: 16,
            }
        }
    }

    impl Transport for Servers {
        async fn exchange(
            &self,
            mirror: usize,
            request: Vec<u8>,
            _max_reply: usize,
        ) -> Result<Vec<u8>, TransportError> {
            let id = match self.behaviour[mirror] {
                Behaviour::Down => return Err(TransportError::Connect("down".into())),
                Behaviour::OtherDatabase => [4; 32],
                Behaviour::Honest => ID,
            };
            let envelope = wire::decode_envelope(&request, request.len()).unwrap();
            let batch = pir_core::protocol::decode_query_batch(envelope.body).unwrap();
            let answers: Vec<Vec<u8>> = batch
                .queries
                .iter()
                .map(|q| q.iter().rev().copied().collect())
                .collect();
            let mut body = pir_core::protocol::encode_answer_payload(&id, &answers);
            // The signature covers the request's database id; the payload names `id`.
            let statement = pir_keys::answer_statement(&batch.release_id, &request, &body);
            body.extend_from_slice(&self.keys[mirror].sign(&statement));
            Ok(wire::encode_envelope(
                envelope.scheme,
                MessageKind::Answer,
                &body,
            ))
        }
    }

    #[tokio::test]
    async fn a_checked_reply_gives_the_answers_and_the_bytes() {
        let servers = Servers::new(&[Behaviour::Honest, Behaviour::Honest]);
        let queries = vec![b"abc".to_vec(), b"de".to_vec()];
        let exchanged = exchange(&servers, servers.call(0), &queries).await.unwrap();
        assert_eq!(exchanged.answers, vec![b"cba".to_vec(), b"ed".to_vec()]);
        assert_eq!(
            exchanged.request,
            reply::request(SchemeId::Chor, &ID, &queries)
        );
        let expect = Expect {
            scheme: SchemeId::Chor,
            database_id: &ID,
            key: &servers.keys[0].public(),
            count: 2,
            max_answer: 16,
        };
        assert!(reply::open(&exchanged.reply, &exchanged.request, expect).is_ok());
        // The same bytes to another server, checked against that server's key.
        let again = resend(&servers, servers.call(1), exchanged.request.clone(), 2)
            .await
            .unwrap();
        assert_eq!(again.request, exchanged.request);
        assert_eq!(again.answers, exchanged.answers);
        assert!(matches!(
            resend(&servers, servers.call(1), exchanged.request, 1).await,
            Err(ExchangeError::Reply {
                error: ReplyError::Signed(_),
                ..
            })
        ));
    }

    #[tokio::test]
    async fn failures_keep_the_request_and_the_evidence() {
        let servers = Servers::new(&[Behaviour::Down, Behaviour::OtherDatabase]);
        let queries = vec![b"abc".to_vec()];
        let sent = reply::request(SchemeId::Chor, &ID, &queries);
        match exchange(&servers, servers.call(0), &queries).await {
            Err(ExchangeError::Transport { request, .. }) => assert_eq!(request, sent),
            other => panic!("expected a transport failure, got {other:?}"),
        }
        let error = exchange(&servers, servers.call(1), &queries)
            .await
            .unwrap_err();
        let ExchangeError::Reply {
            request,
            reply: evidence,
            error: ReplyError::Signed(_),
        } = &error
        else {
            panic!("expected a signed failure, got {error:?}");
        };
        assert_eq!(request, &sent);
        assert!(!evidence.is_empty());
        assert!(matches!(
            SessionError::from_exchange(1, error),
            SessionError::BadReply { server: 1, .. }
        ));
        // Another server's key: the signature does not verify, which proves nothing.
        let wrong_key = Call {
            key: servers.keys[0].public(),
            ..servers.call(1)
        };
        assert!(matches!(
            exchange(&servers, wrong_key, &queries).await,
            Err(ExchangeError::Reply {
                error: ReplyError::BadSignature,
                ..
            })
        ));
    }

    #[tokio::test]
    async fn a_pair_reports_transport_failures_first_then_in_call_order() {
        // The calls to `servers` in this order, each with the same query.
        let calls = |servers: &Servers, order: [usize; 2]| {
            order.map(|server| (servers.call(server), vec![b"xy".to_vec()]))
        };
        let decode = |position: usize, exchanged: Exchanged| -> Result<_, SessionError> {
            Ok((position, exchanged.answers[0].clone()))
        };
        let honest = Servers::new(&[Behaviour::Honest, Behaviour::Honest]);
        let both = exchange_pair(&honest, calls(&honest, [1, 0]), decode)
            .await
            .unwrap();
        assert_eq!(both, ((0, b"yx".to_vec()), (1, b"yx".to_vec())));

        // Server 0's reply fails first in call order, but server 1 could not be reached.
        let servers = Servers::new(&[Behaviour::OtherDatabase, Behaviour::Down]);
        let error = exchange_pair(&servers, calls(&servers, [0, 1]), decode)
            .await
            .unwrap_err();
        assert!(
            matches!(error, SessionError::Transport { server: 1, .. }),
            "{error}"
        );

        // Two bad replies: the first in call order is reported; a failing decode counts as
        // that server's failure, before the next server's reply is looked at.
        let servers = Servers::new(&[Behaviour::OtherDatabase, Behaviour::Honest]);
        let error = exchange_pair(&servers, calls(&servers, [1, 0]), |_, _| -> Result<(), _> {
            Err(SessionError::bad_reply(1, "undecodable"))
        })
        .await
        .unwrap_err();
        assert!(error.to_string().contains("undecodable"), "{error}");
        let error = exchange_pair(&servers, calls(&servers, [0, 1]), decode)
            .await
            .unwrap_err();
        assert!(
            matches!(error, SessionError::BadReply { server: 0, .. }),
            "{error}"
        );
    }
}
