//! Stopping the demo stops everything it started. `hack/demo` runs in a process group of its
//! own, as under a terminal; once it says "The demo is running" it is stopped (a) with SIGINT to
//! the whole group, as a terminal's Ctrl-C does, and (b) with SIGTERM to the script alone, as a
//! supervisor does, after its containerd was killed (so the cgroup fallback has to stop the
//! Pods' processes). Each time the script
//! exits within [`STOP_BOUND`] (the README's bound) and leaves nothing: no process in the node's
//! cgroups, no `semops run`, no `pause`, no containerd shim or node daemon, no listener on the
//! node's address, no bridge, no Pod network namespace, no process of the demo's directory.

mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{NODE_IP, ROOT};

/// How long the demo may take to stop (README: "Stopping the demo").
const STOP_BOUND: Duration = Duration::from_secs(90);
/// Bringing the demo up on a warm machine takes a few minutes; cold builds are done by then.
const START_BOUND: Duration = Duration::from_secs(900);

fn sh(cmd: &str) -> String {
    let out = Command::new("sh").args(["-c", cmd]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What a stopped demo must not leave, one line per thing found.
fn leftovers() -> Vec<String> {
    let mut found = Vec::new();
    let in_cgroups = sh(
        "find /sys/fs/cgroup -path '*kubepods*' -name cgroup.procs 2>/dev/null | xargs -r cat 2>/dev/null | sort -u",
    );
    for pid in in_cgroups.split_whitespace() {
        found.push(format!("process {pid} in the node's cgroups"));
    }
    let demo_dir = format!("{ROOT}/target/demo");
    for line in sh("ps -eo pid=,comm=,args=").lines() {
        let mut f = line.split_whitespace();
        let (Some(pid), Some(comm)) = (f.next(), f.next()) else {
            continue;
        };
        let args: String = f.collect::<Vec<_>>().join(" ");
        let ours = comm == "pause"
            || args.contains("semops run")
            || args.contains("/run/semops-node")
            || args.contains(&demo_dir);
        if ours {
            found.push(format!("process {pid} {comm}: {args}"));
        }
    }
    let listeners = sh(&format!("ss -Hltn 'src {NODE_IP}' 2>/dev/null"));
    for l in listeners.lines().filter(|l| !l.trim().is_empty()) {
        found.push(format!("listener on the node's address: {l}"));
    }
    if Command::new("ip")
        .args(["link", "show", "cni0"])
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success()
    {
        found.push("the bridge cni0".into());
    }
    for ns in sh("ip netns list 2>/dev/null").lines() {
        if ns.starts_with("cni-") {
            found.push(format!("network namespace {ns}"));
        }
    }
    found
}

/// Starts `hack/demo` in a process group of its own and waits until it says it is running.
fn start_demo(log: &std::path::Path) -> Child {
    let mut child = Command::new(format!("{ROOT}/hack/demo"))
        .current_dir(ROOT)
        // This build's binary: a `cargo build` in the demo would replace it (without the
        // test-only failpoints) under the suites that run after this one.
        .env("SEMOPS_BIN", env!("CARGO_BIN_EXE_semops"))
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("hack/demo starts");
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            if line.contains("The demo is running") {
                let _ = tx.send(());
            }
        }
    });
    if rx.recv_timeout(START_BOUND).is_err() {
        let _ = Command::new("kill")
            .args(["-INT", "--", &format!("-{}", child.id())])
            .status();
        let _ = child.wait();
        panic!(
            "the demo did not come up:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }
    child
}

/// Waits for the demo to exit within the bound, then checks it left nothing.
fn stopped_cleanly(mut child: Child, how: &str, log: &std::path::Path) {
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            started.elapsed() < STOP_BOUND,
            "{how}: the demo still runs after {STOP_BOUND:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    println!(
        "{how}: the demo exited ({status}) after {:?}",
        started.elapsed()
    );
    assert!(
        !status.success(),
        "{how}: a stopped demo exits non-zero ({status})"
    );
    // The servers' and the cluster's reapers notice their owner is gone within a second or two.
    let mut left = leftovers();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        left = leftovers();
    }
    assert!(
        left.is_empty(),
        "{how}: left behind:\n{}\n--- demo log:\n{}",
        left.join("\n"),
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

fn signal(target: &str, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, "--", target])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {target}");
}

#[test]
fn the_demo_stops_everything_it_started() {
    assert!(
        leftovers().is_empty(),
        "something of a demo runs already: {:?}",
        leftovers()
    );
    let dir = std::path::PathBuf::from(ROOT).join("target/e2e/demo-stop");
    std::fs::create_dir_all(&dir).unwrap();

    // (a) Ctrl-C: SIGINT to the whole foreground process group.
    let log = dir.join("ctrl-c.log");
    let demo = start_demo(&log);
    signal(&format!("-{}", demo.id()), "-INT");
    stopped_cleanly(demo, "SIGINT to the group", &log);

    // (b) A supervisor's SIGTERM to the script alone (which waits on a background child), after
    // containerd died: the cgroup fallback still stops the Pods' processes.
    let log = dir.join("sigterm-containerd-killed.log");
    let demo = start_demo(&log);
    let containerd =
        std::fs::read_to_string(format!("{ROOT}/target/demo/cluster/pids/containerd.pid"))
            .expect("the demo's containerd pid file");
    let containerd = containerd.trim().to_string();
    signal(&containerd, "-KILL");
    let gone = Instant::now() + Duration::from_secs(30);
    while std::path::Path::new(&format!("/proc/{containerd}/stat")).exists()
        && std::fs::read_to_string(format!("/proc/{containerd}/stat"))
            .is_ok_and(|s| !s.contains(") Z "))
    {
        assert!(Instant::now() < gone, "containerd survived SIGKILL");
        std::thread::yield_now();
    }
    signal(&demo.id().to_string(), "-TERM");
    stopped_cleanly(
        demo,
        "SIGTERM to the script after containerd was killed",
        &log,
    );
}
