//! End-to-end harness shared by the e2e test binaries.
//!
//! One real control plane per test binary (started by `hack/cluster`, torn down by its reaper
//! when the binary exits), or any cluster named by `SEMOPS_TEST_KUBECONFIG`. Each test gets a
//! fresh namespace and, when it needs one, its own `semops run` child process watching only
//! that namespace, so tests in one binary run in parallel without seeing each other.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub mod change_cases;
pub mod checks;
pub mod db;
pub mod iceberg;
pub mod kafka;
pub mod mcp;
pub mod scenarios;
pub mod semops_cli;
pub mod warehouse;

pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");

pub struct Env {
    pub kubeconfig: PathBuf,
    pub bin_dir: PathBuf,
    /// The API server's audit log (own clusters only).
    pub audit_log: Option<PathBuf>,
    pub work_dir: PathBuf,
}

static ENV: OnceLock<Env> = OnceLock::new();
static ENV_NO_CRDS: OnceLock<Env> = OnceLock::new();

fn run_script(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(out.status.success(), "{what} failed ({})", out.status);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The venv of Python tools nobody here wrote (dbt-core with dbt-postgres, ossie-guard,
/// dbt-metricflow), installed once per machine by `hack/ossie-consumers`.
pub fn python_tools() -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| {
        PathBuf::from(run_script(
            &mut Command::new(format!("{ROOT}/hack/ossie-consumers")),
            "hack/ossie-consumers",
        ))
    })
}

/// What kind of cluster a test binary needs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A control plane with the CRDs applied by kubectl.
    Crds,
    /// A control plane without CRDs (for installing them through helm).
    NoCrds,
    /// A control plane with a real node, the semops image imported, no CRDs (helm installs them).
    Node,
}

fn start(kind: Kind) -> Env {
    start_in(
        kind,
        match kind {
            Kind::Crds => "cluster",
            Kind::NoCrds => "cluster-nocrds",
            Kind::Node => "cluster-node",
        },
    )
}

/// Starts a cluster of `kind` in `cluster` (a directory of this binary's work directory).
fn start_in(kind: Kind, cluster: &str) -> Env {
    let install_crds = kind == Kind::Crds;
    let bin_dir = PathBuf::from(run_script(
        Command::new(format!("{ROOT}/hack/testenv")).current_dir(ROOT),
        "hack/testenv",
    ));
    let exe = std::env::current_exe().unwrap();
    let name = exe.file_stem().unwrap().to_string_lossy().to_string();
    let work_dir = PathBuf::from(ROOT)
        .join("target/e2e")
        .join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&work_dir).unwrap();
    let (kubeconfig, audit_log) = match std::env::var("SEMOPS_TEST_KUBECONFIG") {
        Ok(kc) => (PathBuf::from(kc), None),
        Err(_) => {
            // One directory per cluster of this binary (with and without CRDs may both run).
            let dir = work_dir.join(cluster);
            let mut cmd = Command::new(format!("{ROOT}/hack/cluster"));
            cmd.args([
                "up",
                dir.to_str().unwrap(),
                "--owner-pid",
                &std::process::id().to_string(),
            ])
            .current_dir(ROOT);
            if kind == Kind::Node {
                let archive = run_script(
                    Command::new(format!("{ROOT}/hack/image"))
                        .arg("--print")
                        .current_dir(ROOT),
                    "hack/image",
                );
                cmd.arg("--node").env(
                    "SEMOPS_NODE_IMAGES",
                    format!("{archive}=ghcr.io/semops/semops"),
                );
            }
            let kc = run_script(&mut cmd, "hack/cluster up");
            (PathBuf::from(kc), Some(dir.join("logs/audit.log")))
        }
    };
    let env = Env {
        kubeconfig,
        bin_dir,
        audit_log,
        work_dir,
    };
    if install_crds {
        // Right after the API server answers, a write can still be refused for a moment (its
        // bootstrap is not finished): retried, within a bound that only limits how long a
        // failure takes to report. A panic here would start a second cluster in the same
        // directory from the next test's thread.
        let crds = format!("{ROOT}/crds/");
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let out = env.kubectl(&["apply", "-f", &crds]);
            if out.status.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "kubectl apply -f crds/ kept failing: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        // kubectl wait fails at once (".status.conditions accessor error") on a CRD whose
        // status the API server has not written yet: asked again until it can wait.
        loop {
            let out = env.kubectl(&[
                "wait",
                "--for",
                "condition=Established",
                "crd/semanticmodels.semops.io",
                "crd/catalogs.semops.io",
                "crd/reconcilepolicies.semops.io",
                "--timeout=60s",
            ]);
            if out.status.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the CRDs never became Established: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    env
}

/// The environment of this test binary, with the CRDs installed.
pub fn env() -> &'static Env {
    ENV.get_or_init(|| start(Kind::Crds))
}

/// An environment without CRDs (for installing them through helm).
pub fn env_without_crds() -> &'static Env {
    ENV_NO_CRDS.get_or_init(|| start(Kind::NoCrds))
}

/// A control plane of its own with the CRDs, stopped and its directory removed when dropped:
/// for a measurement that must start from an empty API server, without the objects (or the
/// deletion work) of the phase before it.
pub struct OwnCluster {
    pub env: &'static Env,
    dir: PathBuf,
}

impl OwnCluster {
    pub fn start(label: &str) -> Self {
        assert!(
            std::env::var_os("SEMOPS_TEST_KUBECONFIG").is_none(),
            "a cluster of its own cannot be started on a given kubeconfig"
        );
        let env: &'static Env = Box::leak(Box::new(start_in(Kind::Crds, label)));
        let dir = env.kubeconfig.parent().unwrap().to_path_buf();
        Self { env, dir }
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = Command::new(format!("{ROOT}/hack/cluster"))
            .args(["down", self.dir.to_str().unwrap()])
            .status();
    }
}

static ENV_NODE: OnceLock<Env> = OnceLock::new();

/// An environment with a real node (hack/node) and the semops image (hack/image) in its
/// container runtime, without CRDs. One node-backed cluster runs per machine at a time.
pub fn node_env() -> &'static Env {
    ENV_NODE.get_or_init(|| start(Kind::Node))
}

/// The node's address, where Pods reach this machine's servers (PostgreSQL, the API server).
pub const NODE_IP: &str = "10.88.0.1";
/// The node's containerd (hack/node).
pub const NODE_CONTAINERD_SOCKET: &str = "/run/semops-node/containerd.sock";

impl Env {
    pub fn tool(&self, name: &str) -> Command {
        let mut c = Command::new(self.bin_dir.join(name));
        c.env("KUBECONFIG", &self.kubeconfig);
        c
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.tool("kubectl")
            .args(args)
            .output()
            .expect("kubectl runs")
    }

    /// Runs kubectl, asserting success; returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Applies YAML from memory; returns the output (success or not).
    pub fn apply(&self, yaml: &str) -> Output {
        self.kubectl_stdin(&["apply", "-f", "-"], yaml)
    }

    /// Runs kubectl with `yaml` on its standard input; returns the output (success or not).
    pub fn kubectl_stdin(&self, args: &[&str], yaml: &str) -> Output {
        let mut child = self
            .tool("kubectl")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(yaml.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// `kubectl patch --type=merge` of `what` (e.g. `cat/hr`) in `ns`.
    pub fn merge_patch(&self, ns: &str, what: &str, patch: &str) {
        self.kubectl_ok(&["patch", what, "-n", ns, "--type=merge", "-p", patch]);
    }

    pub fn apply_ok(&self, yaml: &str) {
        let out = self.apply(yaml);
        assert!(
            out.status.success(),
            "apply failed: {}\n{yaml}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A fresh namespace, deleted (without waiting) when the guard drops.
    pub fn namespace(&'static self, prefix: &str) -> Namespace {
        let name = format!(
            "{prefix}-{}",
            &uuid::Uuid::now_v7().simple().to_string()[20..]
        );
        self.kubectl_ok(&["create", "namespace", &name]);
        Namespace { env: self, name }
    }

    pub async fn client(&self) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(cfg).unwrap()
    }

    /// Audit events of `verb` on `resource/subresource` in `namespace`. `None` only for a
    /// cluster this harness did not start (`SEMOPS_TEST_KUBECONFIG`, no audit log to read); on
    /// its own clusters an unreadable log fails the test.
    pub fn audited_writes(
        &self,
        namespace: &str,
        resource: &str,
        subresource: &str,
        verb: &str,
    ) -> Option<usize> {
        let Some(log) = self.audit_log.as_ref() else {
            eprintln!("no audit log: this cluster was not started by the harness");
            return None;
        };
        let text = std::fs::read_to_string(log)
            .unwrap_or_else(|e| panic!("the audit log {} is unreadable: {e}", log.display()));
        Some(
            text.lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter(|e| e["stage"] == "ResponseComplete" && e["verb"] == verb)
                .filter(|e| {
                    let o = &e["objectRef"];
                    o["namespace"] == namespace
                        && o["resource"] == resource
                        && o["subresource"].as_str().unwrap_or("") == subresource
                })
                .count(),
        )
    }
}

impl Env {
    /// A ServiceAccount bound to a Role with `rules` (flow YAML) in `ns`, and a token for it.
    /// Returns only once the API server authorizes each `(verb, resource)` of `effective` for
    /// it: a request made before a fresh RoleBinding takes effect would be denied, and the
    /// operator caches denials.
    pub fn service_account_token(
        &self,
        ns: &str,
        name: &str,
        rules: &str,
        effective: &[(&str, &str)],
    ) -> String {
        self.apply_ok(&format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {name}, namespace: {ns}}}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: {name}, namespace: {ns}}}\nrules: {rules}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {name}, namespace: {ns}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {name}}}\nsubjects: [{{kind: ServiceAccount, name: {name}, namespace: {ns}}}]\n"
        ));
        let who = format!("system:serviceaccount:{ns}:{name}");
        for (verb, resource) in effective {
            eventually(
                Duration::from_secs(30),
                &format!("{who} may {verb} {resource}"),
                || {
                    // `resource` may carry flags, e.g. "catalogs.semops.io --subresource=reconcile".
                    let mut args = vec!["auth", "can-i", verb];
                    args.extend(resource.split_whitespace());
                    args.extend(["-n", ns, "--as", &who]);
                    let out = self.kubectl(&args);
                    (String::from_utf8_lossy(&out.stdout).trim() == "yes").then_some(())
                },
            );
        }
        // For semops (its default `--api-token-audiences`): useless against the API server.
        self.kubectl_ok(&["create", "token", name, "-n", ns, "--audience", "semops"])
            .trim()
            .to_string()
    }

    /// A kubeconfig for a client-certificate user of this cluster (`user` in `groups`), signed
    /// by the cluster's CA the way an administrator issues one.
    pub fn client_cert_kubeconfig(&self, user: &str, groups: &[&str]) -> PathBuf {
        let pki = self.kubeconfig.parent().unwrap().join("pki");
        let dir = self.work_dir.join(format!("user-{user}"));
        std::fs::create_dir_all(&dir).unwrap();
        let subject: String = groups
            .iter()
            .map(|g| format!("/O={g}"))
            .chain([format!("/CN={user}")])
            .collect();
        let run = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(&dir)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        run(&[
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "user.key", "-out", "user.csr",
            "-subj", &subject,
        ]);
        let (ca, ca_key, ext) = (
            pki.join("ca.crt"),
            pki.join("ca.key"),
            pki.join("client.ext"),
        );
        run(&[
            "x509",
            "-req",
            "-in",
            "user.csr",
            "-CA",
            ca.to_str().unwrap(),
            "-CAkey",
            ca_key.to_str().unwrap(),
            "-CAcreateserial",
            "-out",
            "user.crt",
            "-days",
            "1",
            "-extfile",
            ext.to_str().unwrap(),
        ]);
        let admin: serde_json::Value =
            serde_saphyr::from_str(&std::fs::read_to_string(&self.kubeconfig).unwrap()).unwrap();
        let cluster = &admin["clusters"][0]["cluster"];
        let out = dir.join("kubeconfig");
        std::fs::write(
            &out,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: {server:?}, certificate-authority: {ca:?}}}\nusers:\n- name: {user}\n  user: {{client-certificate: {crt:?}, client-key: {key:?}}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: {user}}}\ncurrent-context: c\n",
                server = cluster["server"].as_str().unwrap(),
                ca = cluster["certificate-authority"].as_str().unwrap(),
                crt = dir.join("user.crt").to_str().unwrap(),
                key = dir.join("user.key").to_str().unwrap(),
            ),
        )
        .unwrap();
        out
    }

    /// A kubeconfig at `out` for this cluster that authenticates with `token` alone.
    pub fn token_kubeconfig(&self, token: &str, out: &Path) {
        let admin: serde_json::Value =
            serde_saphyr::from_str(&std::fs::read_to_string(&self.kubeconfig).unwrap()).unwrap();
        let cluster = &admin["clusters"][0]["cluster"];
        let yaml = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: {server:?}, certificate-authority: {ca:?}}}\nusers:\n- name: u\n  user: {{token: {token:?}}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n",
            server = cluster["server"].as_str().unwrap(),
            ca = cluster["certificate-authority"].as_str().unwrap(),
        );
        std::fs::write(out, yaml).unwrap();
    }
}

pub struct Namespace {
    env: &'static Env,
    pub name: String,
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = self
            .env
            .kubectl(&["delete", "namespace", &self.name, "--wait=false"]);
    }
}

/// A fresh namespace holding the examples, with an operator for it.
pub fn examples_with_operator(prefix: &str) -> (Namespace, Operator) {
    let env = env();
    let ns = env.namespace(prefix);
    let op = Operator::for_namespace(env, &ns.name);
    env.apply_ok(&examples_in(&ns.name));
    (ns, op)
}

/// The examples/ manifests rewritten into `ns` (the Namespace object itself is skipped), with
/// the `hr` Catalog pointed at this binary's PostgreSQL (loaded with examples/hr.sql).
pub fn examples_in(ns: &str) -> String {
    examples_with(ns, "localhost", db::postgres())
}

/// The examples for an operator running in a Pod: the `hr` Catalog points at the node's address
/// and a PostgreSQL that listens there.
pub fn examples_for_pods(ns: &str) -> String {
    examples_with(ns, NODE_IP, db::postgres_for_pods())
}

/// The examples pointed at `server` through `host`, with the `hr-ca` Secret the demo makes (the
/// server's private CA, which the `hr` Catalog verifies it with).
fn examples_with(ns: &str, host: &str, server: &db::Server) -> String {
    let mut files: Vec<_> = std::fs::read_dir(format!("{ROOT}/examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut docs: Vec<String> = files
        .iter()
        // YAML manifests only (examples/ also holds the demo's SQL), without the Namespace,
        // the Kafka catalog and the Iceberg catalog with its model (their servers are
        // e2e_kafka's and e2e_iceberg's: other suites do not start them).
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            p.extension().is_some_and(|e| e == "yaml")
                && !name.contains("namespace")
                && !name.contains("catalog-events")
                && !name.contains("lake")
        })
        .map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .replace("namespace: example", &format!("namespace: {ns}"))
                .replace("host: localhost", &format!("host: {host}"))
                .replace("port: 5432", &format!("port: {}", server.port))
                // The Secret may go to the test server's host on any port: tests move the
                // Catalog to other ports of it (a refused one, a restarted server).
                .replace("\"localhost:5432\"", &format!("\"{host}\""))
        })
        .collect();
    docs.push(ca_secret(ns, "hr-ca", &server.ca_pem()));
    docs.join("\n---\n")
}

/// What the test operators may connect to: this machine's loopback.
pub const LOOPBACK_HOSTS: &str = "127.0.0.0/8,::1";

/// The annotation a credentials Secret needs to be sent to this machine's test servers.
pub const ALLOWED_LOCAL_HOSTS: &str = "localhost,127.0.0.0/8,::1";

/// An opted-in Secret holding a CA bundle under `ca.crt`.
pub fn ca_secret(ns: &str, name: &str, pem: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": ns, "labels": {"semops.io/catalog-credentials": "true"}},
        "stringData": {"ca.crt": pem},
    })
    .to_string()
}

/// A free loopback port for a daemon the test starts that cannot report its own (`hack/free-port`:
/// below the ephemeral range, where no outgoing connection of a parallel test takes it first).
pub fn daemon_port() -> u16 {
    run_script(
        &mut Command::new(format!("{ROOT}/hack/free-port")),
        "hack/free-port",
    )
    .parse()
    .unwrap()
}

/// A loopback port that refuses connections: bound by the returned socket (so no other process
/// can take it while the guard lives) and never listened on.
pub fn refused_port() -> (u16, tokio::net::TcpSocket) {
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    (held.local_addr().unwrap().port(), held)
}

/// A `semops run` child process. Its ports are chosen by the process itself (`:0`) and read
/// back from its log, so no other process can take them between choice and use.
pub struct Operator {
    child: Option<Child>,
    /// 0 until the process logged its bound address (never, for an operator that exits early).
    pub probe_port: u16,
    pub api_port: u16,
    pub log: PathBuf,
}

/// The address a `semops run` log announced for `message`, once it did.
fn logged_addr(log: &Path, message: &str) -> Option<u16> {
    std::fs::read_to_string(log)
        .ok()?
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["message"] == message)
        .and_then(|v| v["addr"].as_str()?.rsplit(':').next()?.parse().ok())
}

impl Operator {
    /// Starts an operator watching `watch_ns` with its Lease in `lease_ns`, waits for /readyz.
    pub fn start(
        env: &Env,
        kubeconfig: &Path,
        watch_ns: Option<&str>,
        lease_ns: &str,
        extra: &[&str],
    ) -> Operator {
        Operator::start_with_vars(env, kubeconfig, watch_ns, lease_ns, extra, &[])
    }

    fn spawn(
        env: &Env,
        kubeconfig: &Path,
        watch_ns: Option<&str>,
        lease_ns: &str,
        extra: &[&str],
        vars: &[(&str, &str)],
    ) -> Operator {
        Operator::spawn_in(env, kubeconfig, watch_ns, lease_ns, extra, vars, None)
    }

    /// [`Operator::start`] in a mount namespace of its own whose `/etc/resolv.conf` is
    /// `resolv_conf`: the names it resolves go to a DNS server the test runs (needs root).
    pub fn start_with_resolv_conf(
        env: &Env,
        watch_ns: &str,
        extra: &[&str],
        resolv_conf: &Path,
    ) -> Operator {
        let mut op = Operator::spawn_in(
            env,
            &env.kubeconfig,
            Some(watch_ns),
            watch_ns,
            extra,
            &[],
            Some(resolv_conf),
        );
        op.wait_bound();
        eventually(Duration::from_secs(60), "operator ready", || {
            (op.http_get("/readyz").as_deref() == Some("ready")).then_some(())
        });
        op
    }

    fn spawn_in(
        env: &Env,
        kubeconfig: &Path,
        watch_ns: Option<&str>,
        lease_ns: &str,
        extra: &[&str],
        vars: &[(&str, &str)],
        resolv_conf: Option<&Path>,
    ) -> Operator {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let log = env.work_dir.join(format!(
            "operator-{}-{}.log",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let mut cmd = match resolv_conf {
            None => Command::new(env!("CARGO_BIN_EXE_semops")),
            Some(conf) => {
                // unshare and sh exec in turn: the child's pid is the operator's.
                let mut c = Command::new("unshare");
                c.args(["--mount", "--", "sh", "-c"])
                    .arg("mount --bind \"$0\" /etc/resolv.conf && exec \"$@\"")
                    .arg(conf)
                    .arg(env!("CARGO_BIN_EXE_semops"));
                c
            }
        };
        cmd.env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info,semops=debug")
            // The test servers listen on loopback, which semops refuses unless an address entry
            // names it (`--allowed-catalog-hosts` in `extra` replaces this).
            .env("SEMOPS_ALLOWED_CATALOG_HOSTS", LOOPBACK_HOSTS)
            .args([
                "run",
                "--api-addr",
                "127.0.0.1:0",
                "--probe-addr",
                "127.0.0.1:0",
                "--lease-namespace",
                lease_ns,
                "--log-format",
                "json",
            ])
            .args(extra)
            .envs(vars.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(ns) = watch_ns {
            cmd.args(["--watch-namespace", ns]);
        }
        Operator {
            child: Some(cmd.spawn().expect("semops starts")),
            probe_port: 0,
            api_port: 0,
            log,
        }
    }

    /// Waits until the process logged both bound addresses; panics if it exits first.
    fn wait_bound(&mut self) {
        let (probe, api) = eventually(Duration::from_secs(60), "operator ports", || {
            assert!(!self.exited(), "the operator exited:\n{}", self.logs());
            Some((
                logged_addr(&self.log, "serving the probes")?,
                logged_addr(&self.log, "serving the read API")?,
            ))
        });
        self.probe_port = probe;
        self.api_port = api;
    }

    /// [`Operator::start`] with extra environment variables for the child (e.g. failpoints).
    pub fn start_with_vars(
        env: &Env,
        kubeconfig: &Path,
        watch_ns: Option<&str>,
        lease_ns: &str,
        extra: &[&str],
        vars: &[(&str, &str)],
    ) -> Operator {
        let mut op = Operator::spawn(env, kubeconfig, watch_ns, lease_ns, extra, vars);
        op.wait_bound();
        eventually(Duration::from_secs(60), "operator ready", || {
            (op.http_get("/readyz").as_deref() == Some("ready")).then_some(())
        });
        op
    }

    /// An operator whose servers are up (ports known), not waited for to be ready.
    pub fn start_bound(
        env: &Env,
        kubeconfig: &Path,
        watch_ns: Option<&str>,
        lease_ns: &str,
        extra: &[&str],
    ) -> Operator {
        let mut op = Operator::spawn(env, kubeconfig, watch_ns, lease_ns, extra, &[]);
        op.wait_bound();
        op
    }

    /// An operator for `ns` with extra flags and environment variables, not waited for (it
    /// may exit, or be killed at any moment).
    pub fn start_unready(env: &Env, ns: &str, extra: &[&str], vars: &[(&str, &str)]) -> Operator {
        Operator::spawn(env, &env.kubeconfig, Some(ns), ns, extra, vars)
    }

    /// Whether the process has exited.
    pub fn exited(&self) -> bool {
        match &self.child {
            None => true,
            Some(c) => {
                !std::path::Path::new(&format!("/proc/{}", c.id())).exists() || is_zombie(c.id())
            }
        }
    }

    /// An operator for one test namespace, with its Lease there too.
    pub fn for_namespace(env: &Env, ns: &str) -> Operator {
        Operator::start(env, &env.kubeconfig, Some(ns), ns, &[])
    }

    /// The HTTP status of `GET path` on the probe port (0 when nothing answers).
    pub fn http_get_status(&self, path: &str) -> u16 {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.probe_port)) else {
            return 0;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        if write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").is_err() {
            return 0;
        }
        let mut buf = String::new();
        let _ = s.read_to_string(&mut buf);
        buf.split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }

    pub fn http_get(&self, path: &str) -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.probe_port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
        let mut buf = String::new();
        s.read_to_string(&mut buf).ok()?;
        let (head, body) = buf.split_once("\r\n\r\n")?;
        head.starts_with("HTTP/1.0 200")
            .then(|| body.to_string())
            .or_else(|| head.starts_with("HTTP/1.1 200").then(|| body.to_string()))
    }

    /// Sum of a metric's samples whose line contains every `filter` string (0 when it has no
    /// sample yet). Panics when /metrics cannot be scraped or does not describe the metric at
    /// all (a renamed metric would sum to 0), so `== 0.0` never passes vacuously.
    pub fn metric(&self, name: &str, filters: &[&str]) -> f64 {
        let text = self.scrape();
        assert!(
            describes(&text, name),
            "the operator's /metrics has no metric {name}"
        );
        sum_samples(&text, name, filters)
    }

    /// The operator's /metrics in Prometheus text format.
    pub fn scrape(&self) -> String {
        self.http_get("/metrics")
            .unwrap_or_else(|| panic!("cannot scrape /metrics of the operator ({:?})", self.log))
    }

    /// Write requests (POST, PUT, PATCH, DELETE; any answer, conflicts included) this operator
    /// sent, from its own `rest_client_requests_total`, matching `filters`. Reviews (TokenReview,
    /// SubjectAccessReview) are POSTs that store nothing and are left out. One scrape.
    pub fn write_requests(&self, filters: &[&str]) -> f64 {
        write_requests_in(&self.scrape(), filters)
    }

    /// Write requests except those matching `excluded` (e.g. Lease renewals), from one scrape:
    /// two scrapes subtracted could straddle a renewal.
    pub fn write_requests_except(&self, excluded: &str) -> f64 {
        let text = self.scrape();
        write_requests_in(&text, &[]) - write_requests_in(&text, &[excluded])
    }

    pub fn is_leading(&self) -> bool {
        self.metric("leader_election_master_status", &[]) == 1.0
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGKILL: no chance to release the Lease.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait: a graceful shutdown that releases the Lease.
    pub fn terminate(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let _ = c.wait();
        }
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether `name` is a metric of the operator: described in the scrape (a `# TYPE` line for it
/// or for the family a `_total`, `_count`, `_sum` or `_bucket` sample belongs to), or, for a
/// family without samples yet (those are not written), registered by the operator's source.
pub fn describes(text: &str, name: &str) -> bool {
    let family = ["_total", "_count", "_sum", "_bucket"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
        .unwrap_or(name);
    [name, family]
        .iter()
        .any(|n| text.contains(&format!("# TYPE {n} ")) || registered().contains(*n))
}

/// Every metric family name the operator's source registers (`….register("name", …)`).
fn registered() -> &'static std::collections::HashSet<String> {
    static NAMES: OnceLock<std::collections::HashSet<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names = std::collections::HashSet::new();
        let mut stack = vec![Path::new(ROOT).join("src")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for (i, _) in text.match_indices(".register(") {
                        let rest = text[i + ".register(".len()..].trim_start();
                        if let Some(quoted) = rest.strip_prefix('"')
                            && let Some(end) = quoted.find('"')
                        {
                            names.insert(quoted[..end].to_string());
                        }
                    }
                }
            }
        }
        assert!(names.len() > 10, "metric registrations found: {names:?}");
        names
    })
}

/// Write requests of a scrape matching `filters`, reviews left out.
fn write_requests_in(text: &str, filters: &[&str]) -> f64 {
    let sum = |extra: Option<&str>| -> f64 {
        ["POST", "PUT", "PATCH", "DELETE"]
            .iter()
            .map(|m| {
                let method = format!("method=\"{m}\"");
                let mut all = vec![method.as_str()];
                all.extend_from_slice(filters);
                all.extend(extra);
                sum_samples(text, "rest_client_requests_total", &all)
            })
            .sum()
    };
    sum(None) - sum(Some("reviews\""))
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.split_whitespace().nth(2) == Some("Z"))
}

/// Sum of the samples of `name` in Prometheus text whose line contains every `filter`.
fn sum_samples(text: &str, name: &str, filters: &[&str]) -> f64 {
    text.lines()
        .filter(|l| {
            l.starts_with(name)
                && (l.as_bytes().get(name.len()) == Some(&b'{')
                    || l.as_bytes().get(name.len()) == Some(&b' '))
        })
        .filter(|l| filters.iter().all(|f| l.contains(f)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Polls `f` until it returns Some or `timeout` passes (then panics naming `what`).
/// `kubectl wait` until every semops object in `ns` is Ready (what a user of the examples does).
pub fn wait_all_ready(env: &Env, ns: &str) {
    env.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "sm,cat,rpol",
        "--all",
        "-n",
        ns,
        "--timeout=60s",
    ]);
}

/// Runs `command`: whether it succeeded, and its stdout followed by its stderr.
pub fn run_text(mut command: Command) -> (bool, String) {
    let out = command.output().expect("the command starts");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The control-plane tools' directory (kubectl, helm), built first on a fresh machine.
pub fn tool_bin_dir() -> PathBuf {
    let bin = Command::new(format!("{ROOT}/hack/testenv"))
        .arg("bin-dir")
        .output()
        .unwrap();
    let dir = PathBuf::from(String::from_utf8(bin.stdout).unwrap().trim());
    if !dir.join("kubectl").exists() || !dir.join("helm").exists() {
        let built = Command::new(format!("{ROOT}/hack/testenv"))
            .status()
            .unwrap();
        assert!(built.success(), "hack/testenv failed");
    }
    dir
}

/// A Go tool or harness of ours built by `hack/gotool` (once per test binary and name).
pub fn gotool(name: &'static str) -> String {
    static BUILT: std::sync::Mutex<std::collections::BTreeMap<&'static str, String>> =
        std::sync::Mutex::new(std::collections::BTreeMap::new());
    let mut built = BUILT.lock().unwrap();
    built
        .entry(name)
        .or_insert_with(|| {
            let out = Command::new(format!("{ROOT}/hack/gotool"))
                .arg(name)
                .stderr(Stdio::inherit())
                .output()
                .expect("hack/gotool runs");
            assert!(out.status.success(), "hack/gotool {name} failed");
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        })
        .clone()
}

pub fn eventually<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether `f` holds at every poll for the whole `window` (false at the first poll it does
/// not): how a test observes that something does *not* happen.
pub fn holds_for(window: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if !f() {
            return false;
        }
        if start.elapsed() >= window {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Asserts that `f` keeps holding for `window` (fails at the first poll it does not).
pub fn stays(window: Duration, what: &str, f: impl FnMut() -> bool) {
    assert!(holds_for(window, f), "{what} stopped holding");
}

/// `kubectl get` one JSONPath value.
pub fn jsonpath(env: &Env, ns: &str, what: &str, path: &str) -> String {
    String::from_utf8(
        env.kubectl(&["get", "-n", ns, what, "-o", &format!("jsonpath={path}")])
            .stdout,
    )
    .unwrap()
}

/// The Ready condition's (status, reason, message) of an object.
pub fn ready(env: &Env, ns: &str, what: &str) -> (String, String, String) {
    let get = |field: &str| {
        jsonpath(
            env,
            ns,
            what,
            &format!("{{.status.conditions[?(@.type==\"Ready\")].{field}}}"),
        )
    };
    (get("status"), get("reason"), get("message"))
}

/// Waits until the Ready condition has `status` and `reason`; returns its message. On timeout
/// the panic names the last condition seen.
pub fn wait_ready(env: &Env, ns: &str, what: &str, status: &str, reason: &str) -> String {
    let start = Instant::now();
    loop {
        let (s, r, m) = ready(env, ns, what);
        if s == status && r == reason {
            return m;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what} Ready={status}/{reason}; last seen Ready={s}/{r}: {m}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
