//! The read API's listener: TLS when configured, a cap on open connections overall and per
//! peer address (the API server's front-proxy connections are exempt from the latter once their
//! certificate verified), deadlines on the handshake, on a connection's first bytes (before
//! HTTP/1 or HTTP/2 is known), on reading request headers (slowloris) and on idleness, and,
//! around the whole router, a global concurrency limit that sheds load with 503 + Retry-After
//! and a per-request timeout. A connection the API server's front proxy opened carries its user
//! into the request.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::{Service, ServiceBuilder, ServiceExt};

use super::auth::{Caller, Peer, Proxied};
use super::error;
use super::front_proxy::FrontProxy;
use super::tls::{self, Serving};

/// Bounds of the listener (flags of `semops run`).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Open connections at most; more are closed at once.
    pub max_connections: usize,
    /// Open connections from one peer address at most (front-proxy connections excepted).
    pub max_connections_per_peer: usize,
    /// A connection with no request in flight for this long is closed gracefully.
    pub idle_timeout: Duration,
    /// Requests being handled at once; more get 503 OVERLOADED at once.
    pub max_in_flight: usize,
    /// Longest a request may take (503 TIMED_OUT past it).
    pub request_timeout: Duration,
    /// Longest a client may take to send its request headers (and its TLS handshake).
    pub header_read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            max_connections_per_peer: 128,
            idle_timeout: Duration::from_secs(120),
            max_in_flight: 256,
            request_timeout: Duration::from_secs(30),
            header_read_timeout: Duration::from_secs(10),
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Open connections per peer address, each held by a [`PeerSlot`].
#[derive(Clone)]
struct PeerConnections {
    open: Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
    cap: usize,
}

/// One connection's place in its peer's count, given back when dropped.
struct PeerSlot {
    peers: PeerConnections,
    peer: std::net::IpAddr,
}

impl PeerConnections {
    fn new(cap: usize) -> Self {
        PeerConnections {
            open: Arc::default(),
            cap,
        }
    }

    fn try_acquire(&self, peer: std::net::IpAddr) -> Option<PeerSlot> {
        let mut open = self.open.lock().expect("peer counts poisoned");
        let n = open.entry(peer).or_insert(0);
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(PeerSlot {
            peers: self.clone(),
            peer,
        })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut open = self.peers.open.lock().expect("peer counts poisoned");
        if let Some(n) = open.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.peer); // the map holds only peers with open connections
            }
        }
    }
}

/// An I/O whose first read must bring a byte within a deadline: hyper reads a connection's first
/// bytes to tell HTTP/1 from HTTP/2 without any timeout of its own, so a silent client would
/// hold the connection for ever. After the first byte it is the plain stream.
struct FirstBytes<I> {
    io: I,
    deadline: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl<I> FirstBytes<I> {
    fn new(io: I, within: Duration) -> Self {
        FirstBytes {
            io,
            deadline: Some(Box::pin(tokio::time::sleep(within))),
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for FirstBytes<I> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        let before = buf.filled().len();
        let this = &mut *self;
        match std::pin::Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    this.deadline = None;
                }
                Poll::Ready(result)
            }
            Poll::Pending => {
                let expired = this
                    .deadline
                    .as_mut()
                    .is_some_and(|d| d.as_mut().poll(cx).is_ready());
                if expired {
                    Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "no request within the header read timeout",
                    )))
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for FirstBytes<I> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// Requests in flight on one connection, and a wake-up whenever that changes.
#[derive(Default)]
struct Activity {
    in_flight: std::sync::atomic::AtomicUsize,
    changed: tokio::sync::Notify,
}

impl Activity {
    /// Resolves once the connection has had no request in flight for `idle`.
    async fn idle_for(&self, idle: Duration) {
        use std::sync::atomic::Ordering;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.in_flight.load(Ordering::SeqCst) == 0 {
                tokio::select! {
                    () = tokio::time::sleep(idle) => return,
                    () = changed => {}
                }
            } else {
                changed.await;
            }
        }
    }
}

/// Counts a request in flight until dropped.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> Self {
        activity
            .in_flight
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        activity.changed.notify_waiters();
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

/// The router behind the global limits; its errors become the API's envelope.
fn limited(
    router: Router,
    limits: Limits,
) -> impl Service<
    axum::extract::Request,
    Response = Response,
    Error = BoxError,
    Future = impl Send + 'static,
> + Clone
+ Send
+ 'static {
    ServiceBuilder::new()
        .load_shed()
        .concurrency_limit(limits.max_in_flight)
        .timeout(limits.request_timeout)
        .service(router)
}

fn rejection(e: &BoxError) -> Response {
    if e.is::<tower::load_shed::error::Overloaded>() {
        error::OVERLOADED.into_response()
    } else if e.is::<tower::timeout::error::Elapsed>() {
        error::TIMED_OUT.into_response()
    } else {
        tracing::warn!(error = %e, "read API request failed");
        error::INTERNAL.into_response()
    }
}

/// Marks the request with its peer and, when the connection is the front proxy's, the user it
/// named.
fn with_user(
    mut req: hyper::Request<Incoming>,
    front: Option<&FrontProxy>,
    peer: std::net::IpAddr,
) -> axum::extract::Request {
    req.extensions_mut().remove::<Proxied>();
    req.extensions_mut().insert(Peer(peer));
    if let Some(caller) = front.and_then(|fp| fp.caller(req.headers())) {
        let caller: Caller = caller;
        req.extensions_mut().insert(Proxied(caller));
    }
    req.map(axum::body::Body::new)
}

/// Serves `router` on `listener` until `shutdown`; in-flight requests finish first.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    tls: Option<Arc<Serving>>,
    limits: Limits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let app = limited(router, limits);
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let per_peer = PeerConnections::new(limits.max_connections_per_peer);
    let mut http = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    http.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    http.http2().timer(TokioTimer::new());
    let http = Arc::new(http);
    let open = tokio_util::task::TaskTracker::new();
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!(error = %e, "accepting a read API connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            drop(stream); // over the cap: closed at once, nothing read
            continue;
        };
        let Some(slot) = per_peer.try_acquire(peer.ip()) else {
            drop(stream); // this peer holds its share: closed at once, others are served
            continue;
        };
        let (app, http, tls, shutdown) = (app.clone(), http.clone(), tls.clone(), shutdown.clone());
        let handshake = limits.header_read_timeout;
        let idle = limits.idle_timeout;
        open.spawn(async move {
            let _permit = permit;
            let mut slot = Some(slot);
            let _ = stream.set_nodelay(true);
            match tls {
                None => {
                    let io = TokioIo::new(FirstBytes::new(stream, handshake));
                    connection(&http, io, app, None, peer.ip(), shutdown, None, idle).await
                }
                Some(tls) => {
                    // Taken before the config it is compared with: a change in between closes.
                    let changes = tls.changes();
                    let current = tls.current();
                    let acceptor = tokio_rustls::TlsAcceptor::from(current.config.clone());
                    let Ok(Ok(stream)) =
                        tokio::time::timeout(handshake, acceptor.accept(stream)).await
                    else {
                        return;
                    };
                    let front = tls::front_proxy_of(&current, stream.get_ref().1);
                    if front.is_some() {
                        // The API server multiplexes every user over its connections: they
                        // are not one peer's share (the global cap still holds).
                        slot.take();
                    }
                    let io = TokioIo::new(FirstBytes::new(stream, handshake));
                    connection(
                        &http,
                        io,
                        app,
                        front,
                        peer.ip(),
                        shutdown,
                        Some(changes),
                        idle,
                    )
                    .await
                }
            }
        });
    }
    open.close();
    open.wait().await;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn connection<I, S>(
    http: &hyper_util::server::conn::auto::Builder<TokioExecutor>,
    io: TokioIo<I>,
    app: S,
    front: Option<Arc<FrontProxy>>,
    peer: std::net::IpAddr,
    shutdown: CancellationToken,
    tls_changes: Option<tokio::sync::watch::Receiver<u64>>,
    idle: Duration,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Service<axum::extract::Request, Response = Response, Error = BoxError>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let activity = Arc::new(Activity::default());
    let counted = activity.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let req = with_user(req, front.as_deref(), peer);
        let app = app.clone();
        // Counted until the response is handed back (its body streams after; the request
        // timeout bounds that).
        let in_flight = InFlight::start(&counted);
        async move {
            let response = match app.oneshot(req).await {
                Ok(response) => response,
                Err(e) => rejection(&e),
            };
            drop(in_flight);
            Ok::<_, Infallible>(response)
        }
    });
    let conn = http.serve_connection(io, service);
    tokio::pin!(conn);
    // A new TLS config (certificate or front proxy) ends the connection gracefully: the client
    // reconnects under it. Without TLS (or once the sender is gone) nothing changes.
    let config_changed = async {
        if let Some(mut rx) = tls_changes
            && rx.changed().await.is_ok()
        {
            return;
        }
        std::future::pending().await
    };
    tokio::select! {
        _ = conn.as_mut() => {}
        () = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
        () = activity.idle_for(idle) => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
        () = config_changed => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}
