//! A scripted Kubernetes API server for unit tests of code that writes or asks through a
//! [`kube::Client`], in the manner of tower-test's mock service (as kube-rs's controller-rs
//! tests its reconciler): every request is recorded, and answered from a script in order. A
//! request beyond the script is answered 500, so an unexpected call fails the test that made it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::Value;

/// One request as the API server saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    /// Path and query.
    pub path: String,
    pub content_type: String,
    pub body: Value,
}

/// The requests seen so far.
#[derive(Clone, Default)]
pub struct Recorder(Arc<Mutex<Vec<Seen>>>);

impl Recorder {
    pub fn seen(&self) -> Vec<Seen> {
        self.0.lock().unwrap().clone()
    }
}

/// A client whose API server answers `script` (status, JSON body) in order.
pub fn client(script: Vec<(u16, Value)>) -> (kube::Client, Recorder) {
    let script = Arc::new(Mutex::new(VecDeque::from(script)));
    let recorder = Recorder::default();
    let seen = recorder.clone();
    let service = tower::service_fn(move |req: hyper::http::Request<kube::client::Body>| {
        let (script, seen) = (script.clone(), seen.clone());
        async move {
            let (parts, body) = req.into_parts();
            let bytes = body.collect().await?.to_bytes();
            seen.0.lock().unwrap().push(Seen {
                method: parts.method.to_string(),
                path: parts
                    .uri
                    .path_and_query()
                    .map(|p| p.to_string())
                    .unwrap_or_default(),
                content_type: parts
                    .headers
                    .get(hyper::http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string(),
                body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            });
            let (status, answer) = script.lock().unwrap().pop_front().unwrap_or((
                500,
                serde_json::json!({"kind": "Status", "code": 500, "message": "not in the script"}),
            ));
            let response = hyper::http::Response::builder()
                .status(status)
                .header(hyper::http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(answer.to_string())))
                .expect("a response");
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(response)
        }
    });
    (kube::Client::new(service, "default"), recorder)
}

/// A `Status` answer with `code` and `reason`.
pub fn status(code: u16, reason: &str) -> (u16, Value) {
    (
        code,
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "code": code, "reason": reason, "message": reason}),
    )
}
