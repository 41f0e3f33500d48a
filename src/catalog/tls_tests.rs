//! Each sslMode's settings in a real rustls handshake against a rustls server in memory, with
//! the certificates of tests/fixtures/tls (a test CA, a server certificate for `db.test`, a
//! client certificate, and keys that belong to none of them).

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{ClientConnection, ServerConfig, ServerConnection};

use super::tls_config;
use crate::catalog::{ClientCertificate, ProviderError};
use crate::crd::catalog::SslMode;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/tls/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn chain(name: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(&fixture(name))
        .collect::<Result<_, _>>()
        .unwrap()
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Presents `db.test`'s certificate, signing the handshake with `key` (the certificate's own,
/// or a stranger's: an impostor holding a copy of the certificate but not its key).
#[derive(Debug)]
struct Presents(Arc<CertifiedKey>);

impl ResolvesServerCert for Presents {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

struct Server {
    key: &'static str,
    tls12_only: bool,
    /// Asks for a client certificate issued by the test CA.
    mutual: bool,
}

impl Server {
    const HONEST: Server = Server {
        key: "server.key",
        tls12_only: false,
        mutual: false,
    };

    fn config(&self) -> Arc<ServerConfig> {
        let key = PrivateKeyDer::from_pem_slice(&fixture(self.key)).unwrap();
        let signer = provider().key_provider.load_private_key(key).unwrap();
        let versions: &[&rustls::SupportedProtocolVersion] = if self.tls12_only {
            &[&rustls::version::TLS12]
        } else {
            rustls::DEFAULT_VERSIONS
        };
        let builder = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(versions)
            .unwrap();
        let builder = if self.mutual {
            let mut roots = rustls::RootCertStore::empty();
            roots.add_parsable_certificates(chain("ca.pem"));
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let presented = CertifiedKey::new(chain("server.pem"), signer);
        Arc::new(builder.with_cert_resolver(Arc::new(Presents(Arc::new(presented)))))
    }
}

/// Hands what `from` has to send to `to`, which processes it.
fn deliver<A, B>(
    from: &mut rustls::ConnectionCommon<A>,
    to: &mut rustls::ConnectionCommon<B>,
) -> Result<(), rustls::Error> {
    let mut wire = Vec::new();
    while from.wants_write() {
        from.write_tls(&mut wire).unwrap();
    }
    let mut rd = &wire[..];
    while !rd.is_empty() {
        to.read_tls(&mut rd).unwrap();
    }
    to.process_new_packets().map(drop)
}

/// A full handshake in memory, as `name`; the first side's error ends it.
fn handshake(
    client: rustls::ClientConfig,
    name: &str,
    server: &Server,
) -> Result<(), rustls::Error> {
    let name = ServerName::try_from(name.to_string()).unwrap();
    let mut c = ClientConnection::new(Arc::new(client), name)?;
    let mut s = ServerConnection::new(server.config())?;
    for _ in 0..16 {
        deliver(&mut c, &mut s)?;
        deliver(&mut s, &mut c)?;
        if !c.is_handshaking() && !s.is_handshaking() && !c.wants_write() {
            return Ok(());
        }
    }
    panic!("the handshake did not finish");
}

#[test]
fn each_ssl_mode_accepts_exactly_the_servers_it_promises() {
    use SslMode::*;
    // (mode, CA bundle, name dialled, handshake succeeds)
    let cases = [
        (VerifyFull, Some("ca.pem"), "db.test", true),
        (VerifyFull, Some("ca.pem"), "other.test", false),
        (VerifyFull, Some("other-ca.pem"), "db.test", false),
        (VerifyFull, None, "db.test", false),
        // verify-ca: the chain, not the name (libpq's meaning).
        (VerifyCa, Some("ca.pem"), "db.test", true),
        (VerifyCa, Some("ca.pem"), "other.test", true),
        (VerifyCa, Some("other-ca.pem"), "db.test", false),
        (VerifyCa, None, "db.test", false),
        // require/prefer: encrypted, any certificate.
        (Require, None, "other.test", true),
        (Require, Some("other-ca.pem"), "db.test", true),
        (Prefer, None, "db.test", true),
    ];
    for (mode, ca, name, succeeds) in cases {
        let ca = ca.map(fixture);
        let config = tls_config(mode, ca.as_deref(), None).unwrap();
        let result = handshake(config, name, &Server::HONEST);
        assert_eq!(result.is_ok(), succeeds, "{mode:?} {name}: {result:?}");
        if let Err(e) = result {
            assert!(
                matches!(e, rustls::Error::InvalidCertificate(_)),
                "{mode:?} {name}: {e:?}"
            );
        }
    }
}

#[test]
fn a_relaxed_mode_still_checks_that_the_server_holds_the_certificates_key() {
    for (mode, tls12_only) in [
        (SslMode::VerifyCa, false),
        (SslMode::VerifyCa, true),
        (SslMode::Require, false),
        (SslMode::Require, true),
    ] {
        let ca = fixture("ca.pem");
        let honest = Server {
            tls12_only,
            ..Server::HONEST
        };
        let config = tls_config(mode, Some(&ca), None).unwrap();
        assert_eq!(handshake(config, "other.test", &honest), Ok(()), "{mode:?}");
        let impostor = Server {
            key: "unrelated.key",
            ..honest
        };
        let config = tls_config(mode, Some(&ca), None).unwrap();
        let result = handshake(config, "other.test", &impostor);
        assert!(
            matches!(
                result,
                Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::BadSignature
                ))
            ),
            "{mode:?}, TLS 1.2 only {tls12_only}: {result:?}"
        );
    }
}

#[test]
fn a_bundle_of_several_authorities_trusts_each_of_them() {
    let bundle = [fixture("other-ca.pem"), fixture("ca.pem")].concat();
    let config = tls_config(SslMode::VerifyFull, Some(&bundle), None).unwrap();
    assert_eq!(handshake(config, "db.test", &Server::HONEST), Ok(()));
}

#[test]
fn an_unusable_ca_bundle_is_named_and_never_quoted() {
    let cases: [(&[u8], &str); 3] = [
        (b"not a certificate", "holds no PEM certificate"),
        (
            b"-----BEGIN CERTIFICATE-----\nnot*base64\n-----END CERTIFICATE-----\n",
            "holds something that is not a PEM certificate",
        ),
        (
            b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            "a CA certificate is not usable",
        ),
    ];
    for mode in [SslMode::VerifyCa, SslMode::VerifyFull] {
        for (pem, says) in cases {
            let Err(ProviderError::Misconfigured(message)) = tls_config(mode, Some(pem), None)
            else {
                panic!("{mode:?}: {pem:?} was accepted");
            };
            assert!(
                message.starts_with("spec.connection.tls.caSecretRef") && message.contains(says),
                "{mode:?}: {message}"
            );
            assert!(!message.contains("base64") && !message.contains("not a certificate"));
        }
    }
    // require never reads the bundle.
    assert!(tls_config(SslMode::Require, Some(b"not a certificate"), None).is_ok());
}

#[test]
fn the_client_certificate_is_presented_to_a_server_that_asks() {
    let ca = fixture("ca.pem");
    let mutual = Server {
        mutual: true,
        ..Server::HONEST
    };
    let client = ClientCertificate::new(fixture("client.pem"), fixture("client.key"));
    for mode in [SslMode::VerifyFull, SslMode::Require] {
        let config = tls_config(mode, Some(&ca), Some(&client)).unwrap();
        assert_eq!(handshake(config, "db.test", &mutual), Ok(()), "{mode:?}");
        let config = tls_config(mode, Some(&ca), None).unwrap();
        assert!(
            handshake(config, "db.test", &mutual).is_err(),
            "{mode:?}: the server wants a certificate"
        );
    }
}

#[test]
fn an_unusable_client_certificate_names_the_key_at_fault_and_never_quotes_it() {
    let (crt, key) = (fixture("client.pem"), fixture("client.key"));
    let bad_base64 = b"-----BEGIN CERTIFICATE-----\nsecret*text\n-----END CERTIFICATE-----\n";
    // (tls.crt, tls.key, what the message says)
    let cases: [(&[u8], &[u8], &str); 4] = [
        (b"secret text", &key, "tls.crt holds no PEM certificate"),
        (
            bad_base64,
            &key,
            "tls.crt holds something that is not a PEM certificate",
        ),
        (&crt, b"secret text", "tls.key holds no PEM private key"),
        (
            &crt,
            &fixture("unrelated.key"),
            "tls.key is not the private key of tls.crt's first certificate",
        ),
    ];
    for (chain_pem, key_pem, says) in cases {
        let client = ClientCertificate::new(chain_pem, key_pem);
        let Err(ProviderError::Misconfigured(message)) =
            tls_config(SslMode::VerifyFull, None, Some(&client))
        else {
            panic!("{says}: accepted");
        };
        assert!(
            message.starts_with("spec.connection.tls.clientCertificateSecretRef: ")
                && message.contains(says)
                && message.ends_with("its private key in tls.key"),
            "{message}"
        );
        assert!(!message.contains("secret"), "{message}");
    }
}
