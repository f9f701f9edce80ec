//! `tests/vectors/{oram_node_request,oram_node_info}/fail_*.hex`: the ORAM-node protocol's
//! bodies ([`pir_oram::node_protocol`]) refuse damaged bytes for their stated reason, through
//! the shared runner of `pir_core::codec`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_core::codec::testing::{check_format, FailVector, Patch};
use pir_core::Codec;
use pir_oram::node_protocol::{NodeInfo, NodeRequest};

const DIR: &str = env!("CARGO_MANIFEST_DIR");

/// Slots one batch may name in these vectors.
const MAX_SLOTS: usize = 16;

#[test]
fn node_request() {
    // A batch of two reads and no writes: its written blocks run to the end of the body, so
    // a batch with writes has no "truncated" or "trailing" of its own.
    let good = NodeRequest::Batch {
        reads: vec![1, 2],
        writes: Vec::new(),
        data: Vec::new(),
    }
    .to_bytes();
    // op 0, read count 1, read slots 5..13, write count 13.
    assert_eq!(good.len(), 17);
    let fields: &[Patch<'_>] = &[
        ("unknown_op", "UnknownValue", "operation 9", 0, 1, 9),
        ("reads_above_limit", "OutOfRange", "17 reads > 16", 1, 4, 17),
        (
            "reads_above_bytes",
            "Truncated",
            "4 reads, 3 slots' bytes follow",
            1,
            4,
            4,
        ),
        (
            "writes_above_limit",
            "OutOfRange",
            "17 writes > 16",
            13,
            4,
            17,
        ),
        (
            "writes_above_bytes",
            "Truncated",
            "1 write, no slot follows",
            13,
            4,
            1,
        ),
    ];
    let mut flush = NodeRequest::Flush(7).to_bytes();
    let extra = vec![
        FailVector::new(
            "trailing",
            "TrailingBytes",
            "a byte after a flush's epoch",
            {
                flush.push(0);
                flush.clone()
            },
        ),
        FailVector::new(
            "flush_truncated",
            "Truncated",
            "a flush's epoch one byte short",
            flush[..flush.len() - 2].to_vec(),
        ),
        FailVector::new("info_trailing", "TrailingBytes", "INFO | 0", vec![16, 0]),
    ];
    check_format::<NodeRequest<'_>>(DIR, "oram_node_request", &good, &MAX_SLOTS, fields, extra);
    // A batch's written blocks are the rest of the body, whatever pieces were encoded.
    let data = [&[1u8; 4][..], &[2u8; 4][..]];
    let bytes = NodeRequest::Batch {
        reads: Vec::new(),
        writes: vec![3, 4],
        data: data.to_vec(),
    }
    .to_bytes();
    let NodeRequest::Batch { writes, data, .. } =
        NodeRequest::from_bytes(&bytes, &MAX_SLOTS).unwrap()
    else {
        panic!("not a batch");
    };
    assert_eq!(
        (writes, data),
        (vec![3, 4], vec![&[1, 1, 1, 1, 2, 2, 2, 2][..]])
    );
}

#[test]
fn node_info() {
    let good = NodeInfo {
        block_size: 4096,
        blocks: 5000,
        epoch: 12,
        id: [9; 16],
    }
    .to_bytes();
    assert_eq!(good.len(), 32);
    check_format::<NodeInfo>(DIR, "oram_node_info", &good, &(), &[], Vec::new());
}
