//! `semops run` stops within a bounded time on SIGTERM whatever state it is in (kubelet sends
//! SIGTERM, then SIGKILL after the Pod's grace period): here with its API server unreachable,
//! so the caches never sync and the Lease can be neither held nor released. (In-cluster, with a
//! reachable API server, e2e_incluster deletes the leader's Pod.)

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The bound semops states (src/run.rs: SHUTDOWN_GRACE + LEASE_RELEASE_GRACE + 1 s) plus slack
/// for a loaded machine; this is a liveness limit, not a speed target.
const BOUND: Duration = Duration::from_secs(20);

#[test]
fn sigterm_stops_an_operator_whose_api_server_is_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    // A port bound and never listened on: every request is refused.
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::File::create(&kubeconfig)
        .unwrap()
        .write_all(
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"https://{}\", insecure-skip-tls-verify: true}}}}]\nusers: [{{name: u, user: {{token: x}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\n",
                held.local_addr().unwrap()
            )
            .as_bytes(),
        )
        .unwrap();
    let log = dir.path().join("operator.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_semops"))
        .env("KUBECONFIG", &kubeconfig)
        .args([
            "run",
            "--probe-addr",
            "127.0.0.1:0",
            "--api-addr",
            "127.0.0.1:0",
            "--log-format",
            "json",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // Up and failing: its servers are bound and its watches have failed at least once.
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("serving the read API") && text.contains("watch failed") {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "exited early:\n{text}");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "never started:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let signalled = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if signalled.elapsed() > BOUND {
            let _ = child.kill();
            panic!(
                "still running {BOUND:?} after SIGTERM:\n{}",
                std::fs::read_to_string(&log).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    println!("stopped {:?} after SIGTERM", signalled.elapsed());
    assert!(status.success(), "{status}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("shutdown requested") && text.contains("\"stopped\""),
        "{text}"
    );
    drop(held);
}
