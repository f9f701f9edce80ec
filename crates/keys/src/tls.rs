//! TLS 1.3 where the mirror's identity is its Ed25519 key from the signed mirror list.
//!
//! The server presents a self-signed certificate for its key (made with rcgen). The client
//! does not use certificate authorities: it checks the handshake's CertificateVerify signature
//! under the *pinned* public key, so only the holder of that mirror's secret key can complete
//! the handshake. Both sides speak TLS 1.3 only, with the `ring` provider.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::{KeyError, PublicKey, SecretKey};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server configuration presenting a self-signed certificate for `key`.
pub fn server_config(key: &SecretKey) -> Result<Arc<rustls::ServerConfig>, KeyError> {
    server_config_with(key, None)
}

/// A client configuration that accepts exactly the server holding `pinned`'s secret key.
pub fn client_config(pinned: PublicKey) -> Result<Arc<rustls::ClientConfig>, KeyError> {
    client_config_with(pinned, None)
}

/// The error of a failed TLS set-up.
fn crypto(e: impl std::fmt::Display) -> KeyError {
    KeyError::Crypto(format!("TLS set-up: {e}"))
}

/// TLS 1.3 only, `key`'s certificate, HTTP/1.1 by ALPN; with a `client`, only the holder of
/// that key completes a handshake.
fn server_config_with(
    key: &SecretKey,
    client: Option<PublicKey>,
) -> Result<Arc<rustls::ServerConfig>, KeyError> {
    let (cert, private) = certified(key)?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(crypto)?;
    let builder = match client {
        Some(client) => {
            builder.with_client_cert_verifier(Arc::new(PinnedClient(PinnedKey(client))))
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(vec![cert], private)
        .map_err(crypto)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// TLS 1.3 only, the server checked against `pinned`, HTTP/1.1 by ALPN; with a `client`
/// key, its certificate is presented when the server asks.
fn client_config_with(
    pinned: PublicKey,
    client: Option<&SecretKey>,
) -> Result<Arc<rustls::ClientConfig>, KeyError> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(crypto)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedKey(pinned)));
    let mut config = match client {
        Some(client) => {
            let (cert, private) = certified(client)?;
            builder
                .with_client_auth_cert(vec![cert], private)
                .map_err(crypto)?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The server name to put in the TLS ClientHello; identity is checked by key, not by name.
pub fn server_name() -> ServerName<'static> {
    // "pir-mirror" is a valid DNS name, so the conversion cannot fail.
    #[allow(clippy::expect_used)]
    ServerName::try_from("pir-mirror").expect("valid DNS name")
}

#[derive(Debug)]
struct PinnedKey(PublicKey);

/// DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410 section 4), followed by the key.
const ED25519_SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

impl PinnedKey {
    /// Whether `certificate` carries the pinned key's SubjectPublicKeyInfo.
    fn certifies(&self, certificate: &CertificateDer<'_>) -> bool {
        let mut spki = ED25519_SPKI_PREFIX.to_vec();
        spki.extend_from_slice(&self.0 .0);
        certificate
            .as_ref()
            .windows(spki.len())
            .any(|w| w == spki.as_slice())
    }
}

impl ServerCertVerifier for PinnedKey {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // Early, readable failure when a different mirror answers; the binding that matters is
        // the handshake signature checked below under the pinned key.
        if self.certifies(end_entity) {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "server's key is not the pinned server key {} (the key this client holds for it)",
                self.0.fingerprint()
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("TLS 1.2 is not allowed".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        _cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if dss.scheme != SignatureScheme::ED25519 {
            return Err(rustls::Error::General(
                "server must sign with Ed25519".into(),
            ));
        }
        self.0
            .verify(message, dss.signature())
            .map(|()| HandshakeSignatureValid::assertion())
            .map_err(|_| {
                rustls::Error::General(
                    "handshake signature is not from the pinned server key".into(),
                )
            })
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        vec![SignatureScheme::ED25519]
    }
}

/// The self-signed certificate and key of `key`, for either end of a handshake.
fn certified(
    key: &SecretKey,
) -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), KeyError> {
    let pkcs8 = PrivatePkcs8KeyDer::from(key.pkcs8().to_vec());
    let key_pair = rcgen::KeyPair::from_pkcs8_der_and_sign_algo(&pkcs8, &rcgen::PKCS_ED25519)
        .map_err(crypto)?;
    let params = rcgen::CertificateParams::new(vec!["pir-mirror".to_string()]).map_err(crypto)?;
    let cert = params.self_signed(&key_pair).map_err(crypto)?;
    Ok((cert.der().clone(), PrivateKeyDer::Pkcs8(pkcs8)))
}

/// A server configuration presenting `key`'s certificate that completes a handshake only with
/// a client proving it holds `client`'s secret key (TLS 1.3 client authentication, checked
/// like the server's: the CertificateVerify signature under the pinned key, no authorities).
/// A client without a certificate, or with another key, is refused during the handshake,
/// before it can send a request.
pub fn server_config_for_client(
    key: &SecretKey,
    client: PublicKey,
) -> Result<Arc<rustls::ServerConfig>, KeyError> {
    server_config_with(key, Some(client))
}

/// A client configuration that accepts exactly the server holding `pinned`'s secret key and
/// proves it holds `client` (for servers made with [`server_config_for_client`]).
pub fn client_config_with_key(
    pinned: PublicKey,
    client: &SecretKey,
) -> Result<Arc<rustls::ClientConfig>, KeyError> {
    client_config_with(pinned, Some(client))
}

/// Checks a client's certificate and handshake signature against one pinned key.
#[derive(Debug)]
struct PinnedClient(PinnedKey);

impl rustls::server::danger::ClientCertVerifier for PinnedClient {
    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        // The same early, readable check as for servers; the signature below is what binds.
        if self.0.certifies(end_entity) {
            Ok(rustls::server::danger::ClientCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "the client's key is not the owner's".into(),
            ))
        }
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        vec![SignatureScheme::ED25519]
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Runs a handshake in memory; the first error either side reports.
    fn handshake(
        client: Arc<rustls::ClientConfig>,
        server: Arc<rustls::ServerConfig>,
    ) -> Result<(), rustls::Error> {
        let mut c = rustls::ClientConnection::new(client, server_name())?;
        let mut s = rustls::ServerConnection::new(server)?;
        for _ in 0..8 {
            let mut wire = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut wire).unwrap();
            }
            s.read_tls(&mut &wire[..]).unwrap();
            s.process_new_packets()?;
            let mut wire = Vec::new();
            while s.wants_write() {
                s.write_tls(&mut wire).unwrap();
            }
            c.read_tls(&mut &wire[..]).unwrap();
            c.process_new_packets()?;
            if !c.is_handshaking() && !s.is_handshaking() {
                return Ok(());
            }
        }
        Err(rustls::Error::General(
            "the handshake did not finish".into(),
        ))
    }

    #[test]
    fn only_the_owner_completes_a_handshake_with_an_owned_server() {
        let server_key = SecretKey::generate().unwrap();
        let owner = SecretKey::generate().unwrap();
        let stranger = SecretKey::generate().unwrap();
        let server = server_config_for_client(&server_key, owner.public()).unwrap();
        let pinned = server_key.public();
        handshake(
            client_config_with_key(pinned, &owner).unwrap(),
            server.clone(),
        )
        .unwrap();
        let other = handshake(
            client_config_with_key(pinned, &stranger).unwrap(),
            server.clone(),
        );
        assert!(other.unwrap_err().to_string().contains("not the owner"));
        assert!(handshake(client_config(pinned).unwrap(), server.clone()).is_err());
        // The owner still checks the server's key.
        let impostor = server_config_for_client(&stranger, owner.public()).unwrap();
        assert!(handshake(client_config_with_key(pinned, &owner).unwrap(), impostor).is_err());
    }
}
