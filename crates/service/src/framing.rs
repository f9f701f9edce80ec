//! Sizes of the signed-batch messages, written once for servers and clients.
//!
//! A request is `envelope header | database id | count u16 | count x (len u32 | query)`; a
//! reply is the same with answers, followed by a signature, or an error envelope. Servers
//! refuse larger requests unread; clients refuse larger replies unread.

use pir_core::protocol::{RELEASE_ID_LEN, SIGNATURE_LEN};
use pir_core::wire::{HEADER_LEN, MAX_ERROR_MESSAGE};

/// Bytes of a batch of `count` bodies of at most `body` bytes each, without the signature.
pub fn batch_bytes(count: usize, body: usize) -> usize {
    HEADER_LEN + RELEASE_ID_LEN + 2 + count * (4 + body)
}

/// Largest request envelope of `count` queries of at most `query` bytes each.
pub fn request_bytes(count: usize, query: usize) -> usize {
    batch_bytes(count, query)
}

/// Largest reply envelope to `count` queries with answers of at most `answer` bytes each:
/// the signed answer batch, or an error envelope if that is longer.
pub fn reply_bytes(count: usize, answer: usize) -> usize {
    (batch_bytes(count, answer) + SIGNATURE_LEN).max(error_bytes())
}

/// Largest error envelope.
pub fn error_bytes() -> usize {
    HEADER_LEN + 4 + MAX_ERROR_MESSAGE
}

#[cfg(test)]
mod tests {
    use super::*;
    use pir_core::protocol;
    use pir_core::wire::{self, ErrorCode, MessageKind};
    use pir_core::SchemeId;

    #[test]
    fn sizes_match_the_encoders() {
        let id = [1u8; 32];
        let bodies = vec![vec![0u8; 100], vec![0u8; 7]];
        let request = wire::encode_envelope(
            SchemeId::Chor,
            MessageKind::Query,
            &protocol::encode_query_batch(&id, &bodies),
        );
        assert!(request.len() <= request_bytes(2, 100));
        assert_eq!(request_bytes(2, 100) - request.len(), 93);
        let mut payload = protocol::encode_answer_payload(&id, &[vec![0u8; 50]]);
        payload.extend_from_slice(&[0u8; SIGNATURE_LEN]);
        let reply = wire::encode_envelope(SchemeId::Chor, MessageKind::Answer, &payload);
        assert_eq!(reply.len(), reply_bytes(1, 50).min(batch_bytes(1, 50) + 64));
        let long = "x".repeat(5000);
        let error = wire::encode_envelope(
            SchemeId::Control,
            MessageKind::Error,
            &wire::encode_error(ErrorCode::Internal, &long),
        );
        assert_eq!(error.len(), error_bytes());
        assert!(reply_bytes(1, 1) >= error.len());
    }
}
