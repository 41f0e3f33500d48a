//! Never hand a PostgreSQL server the password in clear. tokio-postgres answers whatever
//! authentication the server asks for, so a Catalog pointed at a hostile listener would send it
//! the password (the `password` method) or an offline-crackable MD5 hash. [`AuthGuard`] reads
//! the server's side of the startup exchange before tokio-postgres does and fails the
//! connection when the server asks for the password in clear (or for MD5 over a channel that
//! does not authenticate the server), so nothing is ever written back.
//!
//! It wraps the TCP socket (to follow a `prefer` connection that falls back to plaintext after
//! the server declines TLS) and the TLS stream (to see the startup exchange inside TLS).
//!
//! After the startup it keeps reading message headers: tokio-postgres reserves a buffer of the
//! length a message declares before its bytes arrive, so a hostile server declaring 4 GiB
//! would cost that much. A message longer than [`MAX_MESSAGE`] fails the connection instead,
//! and so do more than [`MAX_STARTUP`] bytes before the server is ready: tokio-postgres keeps
//! every notice of the startup in memory until then.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, TlsConnect, TlsStream};

/// What the guard refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refuse {
    /// The `password` method (AuthenticationCleartextPassword).
    pub cleartext: bool,
    /// The `md5` method (its answer can be cracked offline by whoever receives it).
    pub md5: bool,
}

const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 4, 210, 22, 47];

/// Longest server message accepted. What semops asks for answers in rows of a few names; the
/// longest message PostgreSQL itself sends to it is an error or notice of a few kilobytes.
pub const MAX_MESSAGE: u32 = 1 << 20;
/// Most bytes a server sends before its first ReadyForQuery (PostgreSQL's own startup answer
/// is a few hundred bytes of parameters).
pub const MAX_STARTUP: u64 = 64 << 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Raw socket before the client spoke: the first write says whether TLS is asked for.
    Opening,
    /// The client sent SSLRequest: the server's next byte is `S` (TLS: the TLS layer's guard
    /// takes over) or `N` (plaintext: parse the startup messages here).
    AwaitingSslAnswer,
    /// Parsing server messages: collecting a 5-byte header, or 4 bytes of an `R` body, or
    /// skipping the rest of a message.
    Header {
        have: u8,
    },
    AuthCode {
        have: u8,
    },
    Skip {
        left: u32,
    },
    /// TLS carries the rest (the TLS layer's guard reads it): bytes pass through.
    Done,
}

/// A stream whose server-to-client startup bytes are checked before anyone reads them.
pub struct AuthGuard<S> {
    inner: S,
    refuse: Refuse,
    phase: Phase,
    header: [u8; 5],
    code: [u8; 4],
    /// Bytes of messages before the first ReadyForQuery, then `None`.
    startup: Option<u64>,
}

impl<S> AuthGuard<S> {
    /// The length field of the message whose header was read (it counts itself).
    fn message_len(&self) -> u32 {
        let [_, a, b, c, d] = self.header;
        u32::from_be_bytes([a, b, c, d])
    }

    /// Guards a raw socket (TLS may or may not be negotiated on it).
    pub fn socket(inner: S, refuse: Refuse) -> Self {
        Self::new(inner, refuse, Phase::Opening)
    }

    /// Guards the stream the startup exchange runs on directly (inside TLS).
    pub fn startup(inner: S, refuse: Refuse) -> Self {
        Self::new(inner, refuse, Phase::Header { have: 0 })
    }

    fn new(inner: S, refuse: Refuse, phase: Phase) -> Self {
        Self {
            inner,
            refuse,
            phase,
            header: [0; 5],
            code: [0; 4],
            startup: Some(0),
        }
    }

    /// Feeds server bytes through the parser; `Err` names what was refused.
    fn inspect(&mut self, bytes: &[u8]) -> Result<(), &'static str> {
        let mut i = 0;
        while i < bytes.len() {
            match self.phase {
                Phase::Done => return Ok(()),
                Phase::Opening => {
                    // The server never speaks first; anything here is not PostgreSQL.
                    return Err("the server spoke before the client");
                }
                Phase::AwaitingSslAnswer => {
                    self.phase = match bytes[i] {
                        b'S' => Phase::Done,
                        _ => Phase::Header { have: 0 },
                    };
                    i += 1;
                }
                Phase::Header { have } => {
                    self.header[have as usize] = bytes[i];
                    i += 1;
                    if have + 1 < 5 {
                        self.phase = Phase::Header { have: have + 1 };
                        continue;
                    }
                    let len = self.message_len();
                    if len > MAX_MESSAGE {
                        return Err(
                            "the server declared a message longer than any PostgreSQL answer to semops (1 MiB)",
                        );
                    }
                    if let Some(seen) = &mut self.startup {
                        *seen += u64::from(len) + 1;
                        if self.header[0] == b'Z' {
                            self.startup = None;
                        } else if *seen > MAX_STARTUP {
                            return Err(
                                "the server sent more than 64 KiB before it was ready (PostgreSQL sends a few hundred bytes)",
                            );
                        }
                    }
                    let body = len.saturating_sub(4);
                    self.phase = match self.header[0] {
                        b'R' if body >= 4 => Phase::AuthCode { have: 0 },
                        _ => Phase::Skip { left: body },
                    };
                }
                Phase::AuthCode { have } => {
                    self.code[have as usize] = bytes[i];
                    i += 1;
                    if have + 1 < 4 {
                        self.phase = Phase::AuthCode { have: have + 1 };
                        continue;
                    }
                    let len = self.message_len();
                    match u32::from_be_bytes(self.code) {
                        3 if self.refuse.cleartext => {
                            return Err(
                                "the server asked for the password in clear text (set sslMode: disable explicitly to allow that)",
                            );
                        }
                        5 if self.refuse.md5 => {
                            return Err(
                                "the server asked for an MD5 password hash over a channel that does not authenticate it (use sslMode verify-ca or verify-full)",
                            );
                        }
                        _ => {
                            self.phase = Phase::Skip {
                                left: len.saturating_sub(8),
                            }
                        }
                    }
                }
                Phase::Skip { left } => {
                    let n = (left as usize).min(bytes.len() - i);
                    i += n;
                    let left = left - n as u32;
                    self.phase = if left == 0 {
                        Phase::Header { have: 0 }
                    } else {
                        Phase::Skip { left }
                    };
                }
            }
        }
        Ok(())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for AuthGuard<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) if this.phase != Phase::Done => {
                if let Err(why) = this.inspect(&buf.filled()[before..]) {
                    // Never let the client see the request: it would answer it.
                    buf.set_filled(before);
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::PermissionDenied, why)));
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AuthGuard<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.phase == Phase::Opening {
            self.phase = if data.starts_with(&SSL_REQUEST) {
                Phase::AwaitingSslAnswer
            } else {
                Phase::Header { have: 0 }
            };
        }
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S: TlsStream + Unpin> TlsStream for AuthGuard<S> {
    fn channel_binding(&self) -> ChannelBinding {
        self.inner.channel_binding()
    }
}

/// A TLS connector whose streams are guarded inside TLS.
pub struct GuardedTls<T> {
    pub inner: T,
    pub refuse: Refuse,
}

impl<S, T> TlsConnect<S> for GuardedTls<T>
where
    T: TlsConnect<S>,
    T::Future: Send + 'static,
    T::Stream: Unpin,
{
    type Stream = AuthGuard<T::Stream>;
    type Error = T::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Stream, Self::Error>> + Send>,
    >;

    fn connect(self, stream: S) -> Self::Future {
        let refuse = self.refuse;
        let handshake = self.inner.connect(stream);
        Box::pin(async move { Ok(AuthGuard::startup(handshake.await?, refuse)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(code: u32, extra: &[u8]) -> Vec<u8> {
        let mut m = vec![b'R'];
        m.extend((8 + extra.len() as u32).to_be_bytes());
        m.extend(code.to_be_bytes());
        m.extend(extra);
        m
    }

    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![kind];
        m.extend((4 + body.len() as u32).to_be_bytes());
        m.extend(body);
        m
    }

    const STRICT: Refuse = Refuse {
        cleartext: true,
        md5: true,
    };

    /// Runs `server` bytes through a guard in every split (byte by byte, whole, halves).
    fn verdicts(start: fn() -> AuthGuard<()>, server: &[u8]) -> Vec<Result<(), &'static str>> {
        let mut out = vec![];
        for chunk in [1, 2, 3, 7, server.len().max(1)] {
            let mut g = start();
            let mut verdict = Ok(());
            for part in server.chunks(chunk) {
                if let Err(e) = g.inspect(part) {
                    verdict = Err(e);
                    break;
                }
            }
            out.push(verdict);
        }
        out
    }

    fn inside_tls() -> AuthGuard<()> {
        AuthGuard::startup((), STRICT)
    }

    fn plaintext_after_n() -> AuthGuard<()> {
        let mut g = AuthGuard::socket((), STRICT);
        g.phase = Phase::AwaitingSslAnswer;
        g
    }

    #[test]
    fn cleartext_and_md5_requests_are_refused_in_any_split_and_scram_passes() {
        let cleartext = auth(3, &[]);
        let md5 = auth(5, &[1, 2, 3, 4]);
        let mut scram = auth(10, b"SCRAM-SHA-256\0\0");
        scram.extend(auth(11, b"r=abc"));
        scram.extend(auth(12, b"v=xyz"));
        scram.extend(auth(0, &[]));
        scram.extend(message(b'S', b"server_version\x0015\0"));
        for v in verdicts(inside_tls, &cleartext) {
            assert!(v.unwrap_err().contains("clear text"));
        }
        for v in verdicts(inside_tls, &md5) {
            assert!(v.unwrap_err().contains("MD5"));
        }
        for v in verdicts(inside_tls, &scram) {
            assert_eq!(v, Ok(()));
        }
        // After `N` to an SSLRequest the same exchange runs in plaintext.
        let mut plain = vec![b'N'];
        plain.extend(&cleartext);
        for v in verdicts(plaintext_after_n, &plain) {
            assert!(v.is_err());
        }
    }

    #[test]
    fn tls_accepted_by_the_server_hands_over_to_the_tls_layer_and_errors_pass() {
        let mut g = plaintext_after_n();
        assert_eq!(g.inspect(b"S\x16\x03\x01garbage-looking-tls"), Ok(()));
        assert_eq!(g.phase, Phase::Done);
        let error = message(b'E', b"SFATAL\0Mno such role\0\0");
        for v in verdicts(inside_tls, &error) {
            assert_eq!(v, Ok(()));
        }
    }

    #[test]
    fn declared_lengths_past_the_bound_fail_before_and_after_authentication() {
        let mut ok = auth(0, &[]);
        for _ in 0..50 {
            ok.extend(message(b'D', b"\0\x01\0\0\0\x03abc"));
        }
        ok.extend(message(b'N', &[b'x'; 4096]));
        for v in verdicts(inside_tls, &ok) {
            assert_eq!(v, Ok(()));
        }
        for huge in [MAX_MESSAGE + 1, u32::MAX] {
            let mut header = vec![b'D'];
            header.extend(huge.to_be_bytes());
            let mut after = ok.clone();
            after.extend(&header);
            for server in [header.clone(), after] {
                for v in verdicts(inside_tls, &server) {
                    assert!(v.unwrap_err().contains("longer than"), "{huge}");
                }
            }
        }
    }

    #[test]
    fn a_startup_that_never_gets_ready_is_cut_off_and_a_ready_one_is_not() {
        let mut flood = auth(0, &[]);
        for _ in 0..10_000 {
            flood.extend(message(b'N', b"SNOTICE\0Mhello\0\0"));
        }
        for v in verdicts(inside_tls, &flood) {
            assert!(v.unwrap_err().contains("before it was ready"));
        }
        let mut ready = auth(0, &[]);
        ready.extend(message(b'Z', b"I"));
        ready.extend(flood);
        for v in verdicts(inside_tls, &ready) {
            assert_eq!(v, Ok(()));
        }
    }

    #[test]
    fn md5_is_allowed_where_the_channel_authenticates_the_server() {
        let mut g = AuthGuard::startup(
            (),
            Refuse {
                cleartext: true,
                md5: false,
            },
        );
        assert_eq!(g.inspect(&auth(5, &[9, 9, 9, 9])), Ok(()));
    }

    #[test]
    fn the_first_client_write_tells_tls_from_plaintext() {
        let mut g = AuthGuard::socket(Vec::<u8>::new(), STRICT);
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let _ = Pin::new(&mut g).poll_write(&mut cx, &SSL_REQUEST);
        assert_eq!(g.phase, Phase::AwaitingSslAnswer);
        let mut g = AuthGuard::socket(Vec::<u8>::new(), STRICT);
        let _ = Pin::new(&mut g).poll_write(&mut cx, b"\0\0\0\x09startup");
        assert_eq!(g.phase, Phase::Header { have: 0 });
    }
}
