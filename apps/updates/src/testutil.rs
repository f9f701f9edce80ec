//! Fixed keys and known answers shared by the unit tests.
//!
//! The keys are PKCS#8 v2 documents for the Ed25519 seeds SHA-256("pir-updates test vendor")
//! and SHA-256("pir-updates test other"). Ed25519 signatures are deterministic, so a manifest
//! signed with the vendor key has a fixed release id; the answers below were computed
//! independently (Python `cryptography`) from the format tables in the module docs.

use pir_keys::SecretKey;

const VENDOR_PKCS8: &str = "3053020101300506032b6570042204205b495b8682cf727ce2444dee70c52ee6\
                            2d7f40e79baafea493313e2d641d6919a1230321002148e763a2d01081839ae0\
                            be01003995bc5d36044c6f2def49feff9c4bdf416f";

const OTHER_PKCS8: &str = "3053020101300506032b657004220420379fce8cbd87ee9572d529a8d22d8ad4\
                           243fc174eb40e65a6bb934ce14950dc6a12303210073229901b9271d2362dc4c\
                           fbc8491d7851a407fae1be7605bb097694199e5a2f";

/// Release id of `manifest::tests::sample()` signed by [`vendor_key`].
pub(crate) const MANIFEST_KAT_RELEASE_ID: &str =
    "0a728c45227251ebbd1a813ecb1b588ac582f2bc781de0273e6826b7ea6e3190";

/// SHA-256 of `mirrors::tests::sample()` signed by [`vendor_key`].
pub(crate) const MIRROR_LIST_KAT_SHA256: &str =
    "23e7602b09e1298c586fe6fea78df4ed7bd634dad28f9ff0f3595d11f0dcfffb";

fn key(pkcs8_hex: &str) -> SecretKey {
    SecretKey::from_pkcs8(&hex::decode(pkcs8_hex).unwrap()).unwrap()
}

/// The test vendor's key.
pub(crate) fn vendor_key() -> SecretKey {
    key(VENDOR_PKCS8)
}

/// A second key: a different vendor, or a mirror.
pub(crate) fn other_key() -> SecretKey {
    key(OTHER_PKCS8)
}

/// SHA-256 of the `Debug` text of the demo layout (300 files, seed 1). A regression pin, not
/// an independent answer: it changes whenever the way names or sizes are drawn changes.
pub(crate) const SAMPLE_LAYOUT_KAT_SHA256: &str =
    "7a44edaa568bb76ab768fbb3a1ff131f32952fbee96f2638c5f88ff7eb390a00";
