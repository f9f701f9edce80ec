//! The credential hash `h = H(username, password)` of username:password corpora (Günther 2019,
//! section 4.2: "They use Argon2 as hash function H", also as proof of work against a client
//! that floods the service).
//!
//! ```text
//! input = CREDENTIAL_DST | u32 LE length of u | u | password     u = normalize(username)
//! h     = Argon2id(password = input, salt = CREDENTIAL_SALT, m, t, p, 32 bytes)   (default)
//!       | SHA-256(input)                                                          (fast builds)
//! ```
//!
//! The username is length-prefixed, so `("ab", "c")` and `("a", "bc")` give different inputs.
//! It is normalized first (surrounding ASCII whitespace removed, ASCII letters lower-cased),
//! because account names are compared that way by nearly every service and a check should not
//! miss `Alice@Example.com` when the dump says `alice@example.com`. Passwords are used byte
//! for byte.
//!
//! The salt is fixed and public: every client must compute the same `h` as the database
//! builder, so a per-user salt is impossible (the same holds for Google Password Checkup).
//! Argon2id still makes every guess of an attacker who holds the database *and* the
//! server's blinding key cost `m` KiB and `t` passes. The parameters are part of the database
//! header, so clients and servers always agree.

use argon2::{Algorithm, Argon2, Params, Version};
use sha2::{Digest, Sha256};

use crate::BreachError;

/// Domain separator at the start of every credential hash input.
pub const CREDENTIAL_DST: &[u8] = b"pir-breach/v1 credential";

/// The fixed, public Argon2id salt (Argon2 requires at least 8 bytes).
pub const CREDENTIAL_SALT: &[u8] = b"pir-breach/v1 credential salt";

/// Bytes of the credential hash `h`.
pub const CREDENTIAL_HASH_BYTES: usize = 32;

/// Largest Argon2 memory a database header may ask for (1 GiB): a client reads the parameters
/// from the server, and a hostile server must not make it allocate without bound.
pub const MAX_ARGON2_MEMORY_KIB: u32 = 1 << 20;

/// Most Argon2 passes a header may ask for.
pub const MAX_ARGON2_ITERATIONS: u32 = 64;

/// Most Argon2 lanes a header may ask for.
pub const MAX_ARGON2_PARALLELISM: u32 = 16;

/// Argon2id cost parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Argon2Params {
    /// `m`, memory in KiB.
    pub memory_kib: u32,
    /// `t`, passes over the memory.
    pub iterations: u32,
    /// `p`, lanes.
    pub parallelism: u32,
}

impl Argon2Params {
    /// m = 19 MiB, t = 2, p = 1: the OWASP password storage cheat sheet's first Argon2id
    /// setting (about 30 to 60 ms per hash on one core of a current machine).
    pub const DEFAULT: Self = Self {
        memory_kib: 19 * 1024,
        iterations: 2,
        parallelism: 1,
    };

    /// Checks the bounds: `8p <= m <= 1 GiB`, `1 <= t <= 64`, `1 <= p <= 16`.
    pub fn validate(&self) -> Result<(), String> {
        let Self {
            memory_kib: m,
            iterations: t,
            parallelism: p,
        } = *self;
        if !(1..=MAX_ARGON2_PARALLELISM).contains(&p) {
            return Err(format!(
                "Argon2 parallelism {p} must be 1 to {MAX_ARGON2_PARALLELISM}"
            ));
        }
        if !(1..=MAX_ARGON2_ITERATIONS).contains(&t) {
            return Err(format!(
                "Argon2 iterations {t} must be 1 to {MAX_ARGON2_ITERATIONS}"
            ));
        }
        if m < 8 * p || m > MAX_ARGON2_MEMORY_KIB {
            return Err(format!(
                "Argon2 memory {m} KiB must be from 8 KiB per lane to {MAX_ARGON2_MEMORY_KIB} KiB"
            ));
        }
        Ok(())
    }
}

/// Which hash a database's entries are keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HashKind {
    /// SHA-1 of the password (hibp and passwords corpora; fixed by HIBP).
    Sha1,
    /// Argon2id credential hash (pairs corpora, the default).
    Argon2id(Argon2Params),
    /// SHA-256 credential hash (pairs corpora too large for Argon2id; no work factor).
    Sha256,
}

impl HashKind {
    /// The id written in database headers.
    pub fn id(&self) -> u8 {
        match self {
            Self::Sha1 => 1,
            Self::Argon2id(_) => 2,
            Self::Sha256 => 3,
        }
    }

    /// A short description ("argon2id m=19456KiB t=2 p=1").
    pub fn describe(&self) -> String {
        match self {
            Self::Sha1 => "sha1".into(),
            Self::Sha256 => "sha256".into(),
            Self::Argon2id(p) => format!(
                "argon2id m={}KiB t={} p={}",
                p.memory_kib, p.iterations, p.parallelism
            ),
        }
    }
}

/// The username as hashed: surrounding ASCII whitespace removed, ASCII letters lower-cased.
pub fn normalize_username(username: &[u8]) -> Vec<u8> {
    username.trim_ascii().to_ascii_lowercase()
}

/// The credential hash `h` of a username and password under `kind` (Argon2id or SHA-256).
pub fn credential_hash(
    kind: &HashKind,
    username: &[u8],
    password: &[u8],
) -> Result<[u8; CREDENTIAL_HASH_BYTES], BreachError> {
    let user = normalize_username(username);
    let user_len = u32::try_from(user.len())
        .map_err(|_| BreachError::Input("username longer than 4 GiB".into()))?;
    let mut input = Vec::with_capacity(CREDENTIAL_DST.len() + 4 + user.len() + password.len());
    input.extend_from_slice(CREDENTIAL_DST);
    input.extend_from_slice(&user_len.to_le_bytes());
    input.extend_from_slice(&user);
    input.extend_from_slice(password);
    let mut h = [0u8; CREDENTIAL_HASH_BYTES];
    match kind {
        HashKind::Sha256 => h = Sha256::digest(&input).into(),
        HashKind::Argon2id(params) => {
            params.validate().map_err(BreachError::Input)?;
            let params = Params::new(
                params.memory_kib,
                params.iterations,
                params.parallelism,
                Some(CREDENTIAL_HASH_BYTES),
            )
            .map_err(|e| BreachError::Input(format!("Argon2 parameters: {e}")))?;
            Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
                .hash_password_into(&input, CREDENTIAL_SALT, &mut h)
                .map_err(|e| BreachError::Input(format!("Argon2id failed: {e}")))?;
        }
        HashKind::Sha1 => {
            return Err(BreachError::Input(
                "SHA-1 is the password hash of hibp and passwords corpora, not a credential hash"
                    .into(),
            ))
        }
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cheap parameters for tests; the default is exercised once.
    const FAST: Argon2Params = Argon2Params {
        memory_kib: 64,
        iterations: 1,
        parallelism: 1,
    };

    #[test]
    fn length_prefix_separates_username_and_password() {
        for kind in [HashKind::Sha256, HashKind::Argon2id(FAST)] {
            let a = credential_hash(&kind, b"ab", b"c").unwrap();
            let b = credential_hash(&kind, b"a", b"bc").unwrap();
            assert_ne!(a, b);
            assert_eq!(a, credential_hash(&kind, b" AB\t", b"c").unwrap());
            assert_ne!(a, credential_hash(&kind, b"ab", b"C").unwrap());
        }
        assert_ne!(
            credential_hash(&HashKind::Sha256, b"ab", b"c").unwrap(),
            credential_hash(&HashKind::Argon2id(FAST), b"ab", b"c").unwrap()
        );
    }

    #[test]
    fn known_answer_sha256() {
        // SHA-256("pir-breach/v1 credential" | 05 00 00 00 | "alice" | "hunter2").
        let mut input = CREDENTIAL_DST.to_vec();
        input.extend_from_slice(&[5, 0, 0, 0]);
        input.extend_from_slice(b"alicehunter2");
        let expected: [u8; 32] = Sha256::digest(&input).into();
        assert_eq!(
            credential_hash(&HashKind::Sha256, b"Alice", b"hunter2").unwrap(),
            expected
        );
    }

    #[test]
    fn default_argon2_parameters_work() {
        let h = credential_hash(&HashKind::Argon2id(Argon2Params::DEFAULT), b"u", b"p").unwrap();
        assert_ne!(h, [0u8; 32]);
    }

    #[test]
    fn parameter_bounds() {
        assert!(Argon2Params::DEFAULT.validate().is_ok());
        let bad = [
            Argon2Params {
                memory_kib: 7,
                ..FAST
            },
            Argon2Params {
                memory_kib: MAX_ARGON2_MEMORY_KIB + 1,
                ..FAST
            },
            Argon2Params {
                iterations: 0,
                ..FAST
            },
            Argon2Params {
                parallelism: 0,
                ..FAST
            },
            Argon2Params {
                parallelism: 17,
                memory_kib: 1024,
                ..FAST
            },
        ];
        for params in bad {
            assert!(params.validate().is_err(), "{params:?}");
            assert!(credential_hash(&HashKind::Argon2id(params), b"u", b"p").is_err());
        }
        assert!(credential_hash(&HashKind::Sha1, b"u", b"p").is_err());
    }
}
