//! The read API's listener: TLS when configured, a cap on open connections, a deadline on the
//! handshake and on reading request headers (slowloris), and, around the whole router, a
//! global concurrency limit that sheds load with 503 + Retry-After and a per-request timeout.
//! A connection the API server's front proxy opened carries its user into the request.

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
            max_in_flight: 256,
            request_timeout: Duration::from_secs(30),
            header_read_timeout: Duration::from_secs(10),
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

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
        let (app, http, tls, shutdown) = (app.clone(), http.clone(), tls.clone(), shutdown.clone());
        let handshake = limits.header_read_timeout;
        open.spawn(async move {
            let _permit = permit;
            let _ = stream.set_nodelay(true);
            match tls {
                None => {
                    let io = TokioIo::new(stream);
                    connection(&http, io, app, None, peer.ip(), shutdown, None).await
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
                    let io = TokioIo::new(stream);
                    connection(&http, io, app, front, peer.ip(), shutdown, Some(changes)).await
                }
            }
        });
    }
    open.close();
    open.wait().await;
    Ok(())
}

async fn connection<I, S>(
    http: &hyper_util::server::conn::auto::Builder<TokioExecutor>,
    io: TokioIo<I>,
    app: S,
    front: Option<Arc<FrontProxy>>,
    peer: std::net::IpAddr,
    shutdown: CancellationToken,
    tls_changes: Option<tokio::sync::watch::Receiver<u64>>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Service<axum::extract::Request, Response = Response, Error = BoxError>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let req = with_user(req, front.as_deref(), peer);
        let app = app.clone();
        async move {
            Ok::<_, Infallible>(match app.oneshot(req).await {
                Ok(response) => response,
                Err(e) => rejection(&e),
            })
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
        () = config_changed => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}
