//! One Kafka connection: TCP (and TLS), the protocol's length-prefixed frames with correlation
//! ids, version negotiation (ApiVersions) and SASL authentication. Messages are encoded and
//! decoded by kafka-protocol; everything here is the thin layer it leaves to its users.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::error::ParseResponseErrorCode;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::sasl::{Scram, ScramError, plain};
use crate::catalog::{Credentials, ProviderError};
use crate::crd::catalog::SaslMechanism;

/// Largest response semops accepts. A metadata answer for a batch of topics is far smaller; the
/// frame is read as it arrives, so a broker that only declares this much costs nothing.
pub const MAX_FRAME: usize = 16 << 20;

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// An authenticated connection to one broker.
pub struct Conn {
    stream: Box<dyn Stream>,
    correlation: i32,
    /// The highest version of each API the broker and semops both speak, by API key.
    versions: Vec<(i16, i16, i16)>,
}

/// How to reach and authenticate to a broker.
pub struct Dial<'a> {
    pub host: &'a str,
    pub port: u16,
    /// The checked addresses (never resolved again).
    pub addresses: &'a crate::catalog::Addresses,
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub sasl: Option<SaslMechanism>,
    pub credentials: &'a Credentials,
    pub timeout: Duration,
}

impl Conn {
    /// Connects, negotiates versions and authenticates.
    pub async fn open(d: &Dial<'_>) -> Result<Conn, ProviderError> {
        let endpoint = format!("{}:{}", d.host, d.port);
        let tcp = d
            .addresses
            .connect(d.host, d.port, d.timeout)
            .await
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::TimedOut => ProviderError::Timeout(d.timeout),
                _ => ProviderError::Unreachable(format!("{endpoint}: {e}")),
            })?;
        tcp.set_nodelay(true).ok();
        let stream: Box<dyn Stream> = match &d.tls {
            None => Box::new(tcp),
            Some(config) => {
                let name =
                    rustls::pki_types::ServerName::try_from(d.host.to_string()).map_err(|_| {
                        ProviderError::Misconfigured(format!("{:?} is not a host name", d.host))
                    })?;
                let tls = tokio::time::timeout(
                    d.timeout,
                    tokio_rustls::TlsConnector::from(config.clone()).connect(name, tcp),
                )
                .await
                .map_err(|_| ProviderError::Timeout(d.timeout))?
                .map_err(|e| ProviderError::Tls(format!("{endpoint}: {}", tls_cause(&e))))?;
                Box::new(tls)
            }
        };
        let mut conn = Conn {
            stream,
            correlation: 0,
            versions: vec![],
        };
        let versions = conn
            .send(
                &ApiVersionsRequest::default()
                    .with_client_software_name(StrBytes::from_static_str("semops"))
                    .with_client_software_version(StrBytes::from_static_str(env!(
                        "CARGO_PKG_VERSION"
                    ))),
                3,
                d.timeout,
            )
            .await?;
        if let Some(e) = versions.error_code.err() {
            return Err(ProviderError::Protocol(format!(
                "{endpoint}: ApiVersions failed: {e:?}"
            )));
        }
        conn.versions = versions
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        if let Some(mechanism) = d.sasl {
            conn.authenticate(mechanism, d.credentials, d.timeout)
                .await
                .map_err(|e| scrubbed(e, d.credentials, &endpoint))?;
        }
        Ok(conn)
    }

    /// The version of `R` to use: the highest both sides speak, at most `max`; `None` when the
    /// broker speaks none of `min..=max`.
    pub fn version<R: Request>(&self, min: i16, max: i16) -> Option<i16> {
        let (_, lo, hi) = self.versions.iter().find(|(k, _, _)| *k == R::KEY)?;
        let v = max.min(*hi);
        (v >= min.max(*lo)).then_some(v)
    }

    async fn authenticate(
        &mut self,
        mechanism: SaslMechanism,
        credentials: &Credentials,
        timeout: Duration,
    ) -> Result<(), ProviderError> {
        let handshake = self
            .send(
                &SaslHandshakeRequest::default()
                    .with_mechanism(StrBytes::from_static_str(mechanism.name())),
                1,
                timeout,
            )
            .await?;
        if handshake.error_code.err().is_some() {
            // Only mechanism names semops knows are repeated: the list is the broker's text.
            const KNOWN: [&str; 5] = [
                "PLAIN",
                "SCRAM-SHA-256",
                "SCRAM-SHA-512",
                "GSSAPI",
                "OAUTHBEARER",
            ];
            let offered: Vec<&str> = handshake
                .mechanisms
                .iter()
                .map(|m| {
                    KNOWN
                        .into_iter()
                        .find(|k| *k == m.as_str())
                        .unwrap_or("another")
                })
                .collect();
            return Err(ProviderError::Misconfigured(format!(
                "the broker does not enable SASL mechanism {} (it offers {}); set spec.connection.sasl.mechanism to one of those",
                mechanism.name(),
                offered.join(", ")
            )));
        }
        match mechanism {
            SaslMechanism::Plain => {
                self.sasl_round(
                    plain(credentials.username(), credentials.expose_password()),
                    credentials,
                    timeout,
                )
                .await?;
            }
            SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => {
                let mut scram = Scram::new(
                    mechanism,
                    credentials.username(),
                    credentials.expose_password(),
                );
                let server_first = self.sasl_round(scram.first(), credentials, timeout).await?;
                let answer = scram.answer(&server_first).map_err(scram_error)?;
                let server_final = self.sasl_round(answer, credentials, timeout).await?;
                scram.verify(&server_final).map_err(scram_error)?;
            }
        }
        Ok(())
    }

    /// One SaslAuthenticate exchange; the broker's refusal is an authentication failure.
    async fn sasl_round(
        &mut self,
        bytes: Vec<u8>,
        credentials: &Credentials,
        timeout: Duration,
    ) -> Result<Bytes, ProviderError> {
        let r = self
            .send(
                &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes)),
                2,
                timeout,
            )
            .await?;
        match r.error_code.err() {
            None => Ok(r.auth_bytes),
            // The broker's message may echo what it was sent: only its error code leaves.
            Some(e) => Err(ProviderError::AuthFailed(credentials.server_said(
                "the broker refused the SASL user name or password of spec.connection.credentialsSecretRef",
                &format!("Kafka error {e:?}"),
                r.error_message.as_ref().map(|m| m.as_str()).unwrap_or(""),
            ))),
        }
    }

    /// Sends one request at `version` and reads its response, within `timeout`.
    pub async fn send<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response, ProviderError> {
        tokio::time::timeout(timeout, self.exchange(request, version))
            .await
            .map_err(|_| ProviderError::Timeout(timeout))?
    }

    async fn exchange<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, ProviderError> {
        self.correlation = self.correlation.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str("semops")));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, R::header_version(version))
            .and_then(|()| request.encode(&mut body, version))
            .map_err(|e| ProviderError::Protocol(format!("encoding {:?}: {e}", api(R::KEY))))?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        let io = |e: std::io::Error| {
            ProviderError::Unreachable(format!("the broker connection failed: {e}"))
        };
        self.stream.write_all(&frame).await.map_err(io)?;
        self.stream.flush().await.map_err(io)?;
        let len = self.stream.read_i32().await.map_err(io)?;
        let len = usize::try_from(len)
            .ok()
            .filter(|l| *l <= MAX_FRAME)
            .ok_or_else(|| ProviderError::Protocol(format!("a response frame of {len} bytes")))?;
        // Grown as bytes arrive (never reserved from the declared length).
        let mut buf = Vec::new();
        (&mut self.stream)
            .take(len as u64)
            .read_to_end(&mut buf)
            .await
            .map_err(io)?;
        if buf.len() < len {
            return Err(ProviderError::Unreachable(format!(
                "the broker closed the connection {} bytes into a {len}-byte response",
                buf.len()
            )));
        }
        let flexible_header = R::Response::header_version(version) >= 1;
        super::frame_check::check(&buf, R::KEY, version, flexible_header).map_err(|e| {
            ProviderError::Protocol(format!(
                "a malformed {:?} v{version} response: {e}",
                api(R::KEY)
            ))
        })?;
        decode::<R>(Bytes::from(buf), version, self.correlation)
    }
}

/// A response frame's header and body; the correlation id must match the request's.
fn decode<R: Request>(
    mut buf: Bytes,
    version: i16,
    correlation: i32,
) -> Result<R::Response, ProviderError> {
    let bad = |e: anyhow::Error| {
        ProviderError::Protocol(format!("decoding {:?} v{version}: {e}", api(R::KEY)))
    };
    let header =
        ResponseHeader::decode(&mut buf, R::Response::header_version(version)).map_err(bad)?;
    if header.correlation_id != correlation {
        return Err(ProviderError::Protocol(format!(
            "response {} to request {correlation}",
            header.correlation_id
        )));
    }
    let response = R::Response::decode(&mut buf, version).map_err(bad)?;
    if buf.has_remaining() {
        return Err(ProviderError::Protocol(format!(
            "{} bytes after a {:?} v{version} response",
            buf.remaining(),
            api(R::KEY)
        )));
    }
    Ok(response)
}

fn api(key: i16) -> String {
    ApiKey::try_from(key)
        .map(|k| format!("{k:?}"))
        .unwrap_or_else(|_| format!("api {key}"))
}

fn scram_error(e: ScramError) -> ProviderError {
    match e {
        ScramError::Rejected(m) => ProviderError::AuthFailed(m),
        ScramError::Malformed(m) => ProviderError::Protocol(m),
    }
}

/// Errors that left the SASL exchange, with the endpoint and without any credential value.
fn scrubbed(e: ProviderError, credentials: &Credentials, endpoint: &str) -> ProviderError {
    let s = |m: String| credentials.scrub(&format!("{endpoint}: {m}"));
    match e {
        ProviderError::AuthFailed(m) => ProviderError::AuthFailed(s(m)),
        ProviderError::Misconfigured(m) => ProviderError::Misconfigured(s(m)),
        ProviderError::Protocol(m) => ProviderError::Protocol(s(m)),
        ProviderError::Unreachable(m) => ProviderError::Unreachable(s(m)),
        other => other,
    }
}

/// The innermost cause of a TLS failure (rustls says which check failed there).
fn tls_cause(e: &std::io::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{MetadataRequest, MetadataResponse};

    fn frame(correlation: i32, response: &MetadataResponse, version: i16) -> Bytes {
        let mut b = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(correlation)
            .encode(&mut b, MetadataResponse::header_version(version))
            .unwrap();
        response.encode(&mut b, version).unwrap();
        b.freeze()
    }

    #[test]
    fn a_response_to_another_request_or_with_trailing_bytes_is_refused() {
        let r = MetadataResponse::default();
        assert!(decode::<MetadataRequest>(frame(7, &r, 12), 12, 7).is_ok());
        assert!(matches!(
            decode::<MetadataRequest>(frame(8, &r, 12), 12, 7),
            Err(ProviderError::Protocol(_))
        ));
        let mut longer = BytesMut::from(&frame(7, &r, 12)[..]);
        longer.put_u8(0);
        assert!(matches!(
            decode::<MetadataRequest>(longer.freeze(), 12, 7),
            Err(ProviderError::Protocol(_))
        ));
        assert!(matches!(
            decode::<MetadataRequest>(Bytes::from_static(&[0, 0]), 12, 7),
            Err(ProviderError::Protocol(_))
        ));
    }
}
