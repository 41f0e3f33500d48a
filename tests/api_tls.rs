//! The read API's TLS listener, over real sockets with certificates made by openssl: the serving
//! certificate is re-read on rotation (and a broken file keeps the old one), and only a client
//! certificate from the front-proxy CA with an allowed name makes `X-Remote-User` mean anything.
//! A client that names itself in headers, or shows another CA's certificate, or the right CA
//! with another name, is nobody.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use semops::api::auth::Asker;
use semops::api::front_proxy::FrontProxy;
use semops::api::listen::{self, Limits};
use semops::api::tls::Serving;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA named `name` in `dir` (`name.crt`, `name.key`).
fn ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
        ],
    );
}

/// A leaf `name` signed by CA `by`: a server certificate for localhost, or a client one.
fn leaf(dir: &Path, name: &str, cn: &str, by: &str, server: bool) {
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            &format!("/CN={cn}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ],
    );
    let ext = if server {
        "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n"
    } else {
        "extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n"
    };
    std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{by}.crt"),
            "-CAkey",
            &format!("{by}.key"),
            "-CAcreateserial",
            "-days",
            "1",
            "-out",
            &format!("{name}.crt"),
            "-extfile",
            &format!("{name}.ext"),
        ],
    );
}

struct Pki {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        ca(&path, "server-ca");
        ca(&path, "front-proxy-ca");
        ca(&path, "other-ca");
        leaf(&path, "server1", "semops-1", "server-ca", true);
        leaf(&path, "server2", "semops-2", "server-ca", true);
        leaf(
            &path,
            "proxy",
            "front-proxy-client",
            "front-proxy-ca",
            false,
        );
        leaf(
            &path,
            "proxy-other-name",
            "someone",
            "front-proxy-ca",
            false,
        );
        leaf(
            &path,
            "proxy-other-ca",
            "front-proxy-client",
            "other-ca",
            false,
        );
        Pki { _dir: dir, path }
    }
    fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
    fn front_proxy(&self) -> FrontProxy {
        let data = [
            (
                "requestheader-client-ca-file".to_string(),
                std::fs::read_to_string(self.file("front-proxy-ca.crt")).unwrap(),
            ),
            (
                "requestheader-allowed-names".to_string(),
                "[\"front-proxy-client\"]".to_string(),
            ),
        ]
        .into_iter()
        .collect();
        FrontProxy::from_data(&data).unwrap().unwrap()
    }
}

/// A router that says who asked: the proxied user, else "nobody".
fn echo() -> Router {
    Router::new().route(
        "/whoami",
        get(|asker: Asker| async move {
            asker
                .proxied
                .map(|c| format!("{} {:?}", c.username, c.groups))
                .unwrap_or_else(|| "nobody".into())
        }),
    )
}

/// `router` on a loopback port within `limits` (TLS with `serving`); the port and the stop.
async fn serve_with(
    router: Router,
    serving: Option<Arc<Serving>>,
    limits: Limits,
) -> (u16, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = CancellationToken::new();
    tokio::spawn(listen::serve(
        listener,
        router,
        serving,
        limits,
        stop.clone(),
    ));
    (port, stop)
}

async fn serve(serving: Arc<Serving>) -> (u16, CancellationToken) {
    serve_with(echo(), Some(serving), Limits::default()).await
}

/// A TLS connection trusting `server-ca`, optionally offering a client certificate.
async fn connect(
    pki: &Pki,
    port: u16,
    client: Option<&str>,
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(pki.file("server-ca.crt")).unwrap())
        .unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some(name) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_file(pki.file(&format!("{name}.crt"))).unwrap()],
                PrivateKeyDer::from_pem_file(pki.file(&format!("{name}.key"))).unwrap(),
            )
            .unwrap(),
    };
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .map_err(|e| e.to_string())
}

/// GET /whoami over TLS trusting `server-ca`, optionally with a client certificate; returns the
/// server's certificate common name and the body, or the handshake error.
async fn whoami(
    pki: &Pki,
    port: u16,
    client: Option<&str>,
    headers: &str,
) -> Result<(String, String), String> {
    let mut tls = connect(pki, port, client).await?;
    let served = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
    let cn = semops::api::front_proxy::common_name(&served).unwrap_or_default();
    let request =
        format!("GET /whoami HTTP/1.1\r\nHost: localhost\r\n{headers}Connection: close\r\n\r\n");
    tls.write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut response = String::new();
    tls.read_to_string(&mut response)
        .await
        .map_err(|e| e.to_string())?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((cn, body))
}

#[tokio::test]
async fn only_the_front_proxys_certificate_makes_the_user_headers_count() {
    let pki = Pki::new();
    let serving = Serving::load(pki.file("server1.crt"), pki.file("server1.key")).unwrap();
    assert!(serving.refresh(Some(pki.front_proxy())).unwrap());
    let (port, stop) = serve(serving).await;
    let claims =
        "X-Remote-User: alice\r\nX-Remote-Group: team-a\r\nX-Remote-Group: system:masters\r\n";

    let (_, body) = whoami(&pki, port, Some("proxy"), claims).await.unwrap();
    assert_eq!(
        body, r#"alice ["team-a", "system:masters"]"#,
        "the front proxy"
    );
    let (_, body) = whoami(&pki, port, None, claims).await.unwrap();
    assert_eq!(body, "nobody", "no certificate: headers mean nothing");
    let (_, body) = whoami(&pki, port, Some("proxy-other-name"), claims)
        .await
        .unwrap();
    assert_eq!(body, "nobody", "the front-proxy CA, but a name not allowed");
    let other_ca = whoami(&pki, port, Some("proxy-other-ca"), claims).await;
    assert!(
        other_ca.as_ref().is_err() || other_ca.as_ref().unwrap().1.is_empty(),
        "another CA's certificate is refused at the handshake: {other_ca:?}"
    );
    let (_, body) = whoami(&pki, port, Some("proxy"), "").await.unwrap();
    assert_eq!(body, "nobody", "the front proxy naming no user");
    stop.cancel();
}

#[tokio::test]
async fn a_connection_opened_before_the_front_proxy_was_known_is_closed_when_it_becomes_known() {
    // The API server keeps its connections open for hours; one made before the front-proxy
    // settings were read carries no client certificate and would be "nobody" for good.
    let pki = Pki::new();
    let serving = Serving::load(pki.file("server1.crt"), pki.file("server1.key")).unwrap();
    let (port, stop) = serve(serving.clone()).await;
    let mut early = connect(&pki, port, Some("proxy")).await.unwrap();
    early
        .write_all(b"GET /whoami HTTP/1.1\r\nHost: localhost\r\nX-Remote-User: alice\r\n\r\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).ends_with("nobody") {
        let mut buf = [0u8; 512];
        let n = early.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "closed before answering: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }

    assert!(serving.refresh(Some(pki.front_proxy())).unwrap());
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), early.read_to_end(&mut rest)).await;
    assert!(
        matches!(closed, Ok(Ok(0))),
        "the idle connection is closed under the new settings: {closed:?} {rest:?}"
    );
    let (_, body) = whoami(&pki, port, Some("proxy"), "X-Remote-User: alice\r\n")
        .await
        .unwrap();
    assert_eq!(body, "alice []", "a new connection is the front proxy's");
    stop.cancel();
}

#[tokio::test]
async fn without_a_front_proxy_client_the_settings_are_settled_at_the_first_round() {
    let pki = Pki::new();
    let serving = Serving::load(pki.file("server1.crt"), pki.file("server1.key")).unwrap();
    let stop = CancellationToken::new();
    let settled = serving.clone();
    assert!(
        tokio::time::timeout(Duration::from_millis(100), settled.settled())
            .await
            .is_err(),
        "not settled before any round"
    );
    tokio::spawn(semops::api::tls::keep_fresh(serving, None, stop.clone()));
    tokio::time::timeout(Duration::from_secs(5), settled.settled())
        .await
        .expect("settled after the first round");
    stop.cancel();
}

#[tokio::test]
async fn a_rotated_certificate_is_served_without_a_restart_and_a_broken_one_is_not() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::copy(pki.file("server1.crt"), &cert).unwrap();
    std::fs::copy(pki.file("server1.key"), &key).unwrap();
    let serving = Serving::load(cert.clone(), key.clone()).unwrap();
    let (port, stop) = serve(serving.clone()).await;
    assert_eq!(whoami(&pki, port, None, "").await.unwrap().0, "semops-1");
    assert!(
        !serving.refresh(None).unwrap(),
        "nothing changed, nothing rebuilt"
    );

    std::fs::copy(pki.file("server2.crt"), &cert).unwrap();
    std::fs::copy(pki.file("server2.key"), &key).unwrap();
    assert!(serving.refresh(None).unwrap());
    assert_eq!(whoami(&pki, port, None, "").await.unwrap().0, "semops-2");

    std::fs::write(&cert, "not a certificate").unwrap();
    let err = serving.refresh(None).unwrap_err();
    assert!(err.contains("--api-tls-cert-file"), "{err}");
    assert_eq!(
        whoami(&pki, port, None, "").await.unwrap().0,
        "semops-2",
        "the previous certificate stays in use"
    );
    let missing = Serving::load(dir.path().join("nope.crt"), key.clone())
        .err()
        .unwrap();
    assert!(missing.contains("nope.crt"), "{missing}");
    stop.cancel();
}

#[tokio::test]
async fn connections_past_the_cap_are_closed_and_a_freed_place_is_served() {
    // The header deadline is far away: the two held connections hold their places for as long
    // as the test decides, not until a clock runs out.
    let (port, stop) = serve_with(
        echo(),
        None,
        Limits {
            max_connections: 2,
            header_read_timeout: Duration::from_secs(600),
            ..Limits::default()
        },
    )
    .await;
    // Two connections that never send a full header hold the two places.
    let mut held = vec![];
    for _ in 0..2 {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        s.write_all(b"GET /whoami HTTP/1.1\r\n").await.unwrap();
        held.push(s);
    }
    // The kernel hands connections to the accept loop in the order they were established, so
    // the two held ones take the places before this one is looked at.
    let mut third = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let _ = third
        .write_all(b"GET /whoami HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    let mut buf = vec![];
    let n = tokio::time::timeout(Duration::from_secs(30), third.read_to_end(&mut buf))
        .await
        .expect("closed at once")
        .unwrap_or(0);
    assert_eq!(n, 0, "over the cap: closed without an answer");
    // A held one goes away: its place comes free once the server has noticed, and a new
    // connection is served again.
    drop(held.pop());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let response = loop {
        let response = plain_get(port, "/whoami").await;
        if response.starts_with("HTTP/1.1 200") || tokio::time::Instant::now() > deadline {
            break response;
        }
        tokio::task::yield_now().await;
    };
    assert!(
        response.starts_with("HTTP/1.1 200") && response.ends_with("nobody"),
        "{response}"
    );
    stop.cancel();
}

#[tokio::test]
async fn a_header_that_never_ends_is_cut_off_at_the_header_deadline() {
    let (port, stop) = serve_with(
        echo(),
        None,
        Limits {
            header_read_timeout: Duration::from_millis(300),
            ..Limits::default()
        },
    )
    .await;
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(b"GET /whoami HTTP/1.1\r\n").await.unwrap();
    // It never finishes, so only the server's deadline can end it (30 s bounds the failure).
    let mut buf = vec![];
    let closed = tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf)).await;
    assert!(closed.is_ok(), "a slow header is cut off");
    stop.cancel();
}

async fn plain_get(port: u16, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).await.unwrap();
    response
}

/// A router whose `/slow` says it has started and then never finishes.
fn never_finishing(started: Arc<tokio::sync::Notify>) -> Router {
    Router::new().route(
        "/slow",
        get(move || {
            let entered = started.clone();
            async move {
                entered.notify_one();
                std::future::pending::<()>().await;
                "never"
            }
        }),
    )
}

#[tokio::test]
async fn past_the_in_flight_limit_requests_are_shed() {
    // The first request holds the only place for as long as the test runs (it never finishes
    // and the request timeout is far away); the second is sent once the first has started.
    let started = Arc::new(tokio::sync::Notify::new());
    let (port, stop) = serve_with(
        never_finishing(started.clone()),
        None,
        Limits {
            max_in_flight: 1,
            request_timeout: Duration::from_secs(600),
            ..Limits::default()
        },
    )
    .await;
    let first = tokio::spawn(plain_get(port, "/slow"));
    started.notified().await;
    let b = plain_get(port, "/slow").await;
    assert!(b.starts_with("HTTP/1.1 503"), "{b}");
    assert!(b.contains(r#""type":"OVERLOADED""#), "{b}");
    assert!(b.to_ascii_lowercase().contains("retry-after: 1"), "{b}");
    first.abort();
    stop.cancel();
}

#[tokio::test]
async fn a_request_past_the_timeout_is_answered_in_the_envelope() {
    let started = Arc::new(tokio::sync::Notify::new());
    let (port, stop) = serve_with(
        never_finishing(started),
        None,
        Limits {
            request_timeout: Duration::from_millis(300),
            ..Limits::default()
        },
    )
    .await;
    // It never finishes, so only the timeout can answer it.
    let a = plain_get(port, "/slow").await;
    assert!(a.starts_with("HTTP/1.1 503"), "{a}");
    assert!(a.contains(r#""type":"TIMED_OUT""#), "{a}");
    stop.cancel();
}

/// A connection from `source` (a loopback address) to the server.
async fn connect_from(source: &str, port: u16) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    socket
        .connect(format!("127.0.0.1:{port}").parse().unwrap())
        .await
        .unwrap()
}

/// Whether the server closes `s` (EOF or reset) before `bound` (which only bounds how long a
/// failure takes to report).
async fn closed_by_server(s: &mut tokio::net::TcpStream, bound: Duration) -> bool {
    let mut buf = vec![];
    tokio::time::timeout(bound, s.read_to_end(&mut buf))
        .await
        .is_ok()
}

#[tokio::test]
async fn one_peer_cannot_take_every_connection() {
    // Silent connections are held for the whole test (a long first-bytes deadline).
    let (port, stop) = serve_with(
        echo(),
        None,
        Limits {
            max_connections: 100,
            max_connections_per_peer: 2,
            header_read_timeout: Duration::from_secs(600),
            ..Limits::default()
        },
    )
    .await;
    let mut held = vec![];
    for _ in 0..2 {
        held.push(connect_from("127.0.0.1", port).await);
    }
    // Let the accept loop take both before the third arrives (it takes them in order).
    let mut probe = connect_from("127.0.0.3", port).await;
    probe
        .write_all(b"GET /whoami HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    probe.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // The same peer's third connection is closed at once; another peer's is served.
    let mut third = connect_from("127.0.0.1", port).await;
    assert!(
        closed_by_server(&mut third, Duration::from_secs(30)).await,
        "over the peer's share: closed (the held ones would wait 600 s)"
    );
    let mut other = connect_from("127.0.0.2", port).await;
    other
        .write_all(b"GET /whoami HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    other.read_to_string(&mut answer).await.unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.ends_with("nobody"),
        "{answer}"
    );
    // A held connection that closes gives its place back.
    drop(held.pop());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut s = connect_from("127.0.0.1", port).await;
        s.write_all(b"GET /whoami HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer).await;
        if answer.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the place never came back"
        );
        tokio::task::yield_now().await;
    }
    stop.cancel();
}

#[tokio::test]
async fn a_connection_that_never_speaks_is_closed_at_the_header_deadline() {
    let (port, stop) = serve_with(
        echo(),
        None,
        Limits {
            header_read_timeout: Duration::from_millis(300),
            ..Limits::default()
        },
    )
    .await;
    // Not one byte: before HTTP/1 or HTTP/2 is known.
    let mut silent = connect_from("127.0.0.1", port).await;
    assert!(
        closed_by_server(&mut silent, Duration::from_secs(30)).await,
        "a silent connection is cut off"
    );
    stop.cancel();
}

/// A router that answers `/slow` after 800 ms (longer than the idle timeout below).
fn with_slow_route() -> Router {
    echo().route(
        "/slow",
        get(|| async {
            tokio::time::sleep(Duration::from_millis(800)).await;
            "done"
        }),
    )
}

#[tokio::test]
async fn idle_connections_are_closed_but_not_while_a_request_runs() {
    let (port, stop) = serve_with(
        with_slow_route(),
        None,
        Limits {
            idle_timeout: Duration::from_millis(300),
            ..Limits::default()
        },
    )
    .await;
    // HTTP/1.1 keep-alive: a request longer than the idle timeout is answered; afterwards the
    // connection, idle, is closed.
    let mut s = connect_from("127.0.0.1", port).await;
    s.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let mut got = String::new();
    while !got.ends_with("done") {
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before the answer: {got}");
        got.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(
        closed_by_server(&mut s, Duration::from_secs(30)).await,
        "an idle keep-alive connection is closed"
    );

    // HTTP/2 (prior knowledge): the same for a multiplexed connection.
    let tcp = connect_from("127.0.0.1", port).await;
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .unwrap();
    let conn = tokio::spawn(conn);
    let response = sender
        .send_request(
            hyper::Request::get("http://x/slow")
                .body(http_body_util::Empty::<hyper::body::Bytes>::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let ended = tokio::time::timeout(Duration::from_secs(30), conn).await;
    assert!(
        ended.is_ok(),
        "an idle HTTP/2 connection is closed by the server"
    );
    stop.cancel();
}
