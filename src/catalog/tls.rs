//! rustls client settings per `sslMode`, shared by the providers that do their own TLS
//! (PostgreSQL through tokio-postgres, Kafka through its own connection).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::{ClientCertificate, ProviderError};
use crate::crd::catalog::SslMode;

/// rustls settings per sslMode: prefer/require encrypt without verifying (libpq semantics);
/// verify-ca verifies the chain to the trusted roots (the Catalog's CA bundle, or the public
/// roots) but not the host name; verify-full verifies both. With `client`, the connection
/// presents that certificate to servers that ask for one (mutual TLS).
pub fn tls_config(
    mode: SslMode,
    ca_pem: Option<&[u8]>,
    client: Option<&ClientCertificate>,
) -> Result<rustls::ClientConfig, ProviderError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions");
    let roots = || -> Result<rustls::RootCertStore, ProviderError> {
        let mut roots = rustls::RootCertStore::empty();
        match ca_pem {
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
            Some(pem) => {
                use rustls::pki_types::pem::PemObject;
                let mut added = 0;
                for cert in CertificateDer::pem_slice_iter(pem) {
                    let cert = cert.map_err(|_| {
                        ProviderError::Misconfigured(
                            "spec.connection.tls.caSecretRef holds something that is not a PEM certificate".into(),
                        )
                    })?;
                    roots.add(cert).map_err(|e| {
                        ProviderError::Misconfigured(format!(
                            "spec.connection.tls.caSecretRef: a CA certificate is not usable: {e}"
                        ))
                    })?;
                    added += 1;
                }
                if added == 0 {
                    return Err(ProviderError::Misconfigured(
                        "spec.connection.tls.caSecretRef holds no PEM certificate".into(),
                    ));
                }
            }
        }
        Ok(roots)
    };
    if mode == SslMode::VerifyFull {
        return with_client_auth(builder.with_root_certificates(roots()?), client);
    }
    // prefer/require check no chain (their verifier only borrows the signature checks), but the
    // builder wants anchors: the public roots serve.
    let trusted = if mode == SslMode::VerifyCa {
        roots()?
    } else {
        rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned())
    };
    let full =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(trusted), provider)
            .build()
            .map_err(|e| ProviderError::Misconfigured(e.to_string()))?;
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Relaxed {
            full,
            any_certificate: mode != SslMode::VerifyCa,
        }));
    with_client_auth(builder, client)
}

const CLIENT_CERTIFICATE: &str = "spec.connection.tls.clientCertificateSecretRef";

/// Finishes the settings with the client certificate, if any. Errors name the Secret's key
/// and never quote its content.
fn with_client_auth(
    builder: rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>,
    client: Option<&ClientCertificate>,
) -> Result<rustls::ClientConfig, ProviderError> {
    use rustls::pki_types::PrivateKeyDer;
    use rustls::pki_types::pem::PemObject;
    let Some(client) = client else {
        return Ok(builder.with_no_client_auth());
    };
    let misconfigured = |what: &str| {
        ProviderError::Misconfigured(format!(
            "{CLIENT_CERTIFICATE}: {what}; the Secret needs the PEM certificate chain in tls.crt and its private key in tls.key"
        ))
    };
    let chain = CertificateDer::pem_slice_iter(&client.chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| misconfigured("tls.crt holds something that is not a PEM certificate"))?;
    if chain.is_empty() {
        return Err(misconfigured("tls.crt holds no PEM certificate"));
    }
    let key = PrivateKeyDer::from_pem_slice(client.expose_key())
        .map_err(|_| misconfigured("tls.key holds no PEM private key (PKCS#8, PKCS#1 or SEC1)"))?;
    builder
        .with_client_auth_cert(chain, key)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => {
                misconfigured("tls.key is not the private key of tls.crt's first certificate")
            }
            _ => misconfigured("the key's algorithm is not supported (use ECDSA, Ed25519 or RSA)"),
        })
}

/// A certificate check weaker than verify-full, over the full verifier (which still checks every
/// handshake signature): `verify-ca` accepts a chain to a trusted root issued for another host
/// name (libpq's meaning); `prefer`/`require` accept any certificate (encryption without
/// authentication, libpq's meaning).
#[derive(Debug)]
struct Relaxed {
    full: Arc<rustls::client::WebPkiServerVerifier>,
    any_certificate: bool,
}

impl ServerCertVerifier for Relaxed {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError, Error};
        if self.any_certificate {
            return Ok(ServerCertVerified::assertion());
        }
        match self
            .full
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            // The chain is checked before the name: a name error means the chain verified.
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.full.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.full.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.full.supported_verify_schemes()
    }
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
