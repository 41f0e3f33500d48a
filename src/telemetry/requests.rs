//! Every request the operator sends to the API server, counted by method, resource and
//! answer (client-go's `rest_client_requests_total`), so write costs are read from the process
//! itself: conflicts, deletes and Events included, not only the writes that succeeded. Their
//! latency (until the answer's headers) by method and resource says which step of a reconcile
//! waits on the API server.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::http::{Request, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The HTTP method (`GET`, `POST`, `PUT`, `PATCH`, `DELETE`).
    pub method: String,
    /// The resource, with its subresource: `semanticmodels/status`, `events`, `leases`.
    pub resource: String,
    /// The status code, or `error` when no answer arrived.
    pub code: String,
}

/// Method and resource, without the answer: the latency histogram's labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabels {
    pub method: String,
    pub resource: String,
}

pub type Latencies = Family<VerbLabels, Histogram, fn() -> Histogram>;

/// A tower layer for the kube client's service stack.
#[derive(Clone)]
pub struct CountRequests {
    pub family: Family<RequestLabels, Counter>,
    pub latency: Latencies,
}

impl Default for CountRequests {
    fn default() -> Self {
        fn histogram() -> Histogram {
            // 0.5 ms .. 16 s
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        }
        Self {
            family: Family::default(),
            latency: Family::new_with_constructor(histogram),
        }
    }
}

impl<S> tower::Layer<S> for CountRequests {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            family: self.family.clone(),
            latency: self.latency.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Counted<S> {
    inner: S,
    family: Family<RequestLabels, Counter>,
    latency: Latencies,
}

impl<S, B, RB> tower::Service<Request<B>> for Counted<S>
where
    S: tower::Service<Request<B>, Response = Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let verb = VerbLabels {
            method: request.method().as_str().to_string(),
            resource: resource_of(request.uri().path()),
        };
        let (family, latency) = (self.family.clone(), self.latency.clone());
        let started = std::time::Instant::now();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let result = answer.await;
            latency
                .get_or_create(&verb)
                .observe(started.elapsed().as_secs_f64());
            let code = match &result {
                Ok(r) => r.status().as_u16().to_string(),
                Err(_) => "error".to_string(),
            };
            // The labels move into the counter's key: no second copy per request.
            family
                .get_or_create(&RequestLabels {
                    method: verb.method,
                    resource: verb.resource,
                    code,
                })
                .inc();
            result
        })
    }
}

/// The resource (and subresource) a Kubernetes API path names, e.g.
/// `/apis/semops.io/v1alpha1/namespaces/a/semanticmodels/m/status` → `semanticmodels/status`.
/// Anything else (discovery, `/version`) is `other`, so the label set stays small.
pub fn resource_of(path: &str) -> String {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => return "other".into(),
    };
    let rest = match rest {
        ["namespaces", _ns, more @ ..] if !more.is_empty() => more,
        other => other,
    };
    match rest {
        [resource] | [resource, _] if !resource.is_empty() => (*resource).into(),
        [resource, _name, sub] => format!("{resource}/{sub}"),
        _ => "other".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::resource_of;

    #[test]
    fn resources_named_by_paths() {
        for (path, want) in [
            (
                "/apis/semops.io/v1alpha1/namespaces/a/semanticmodels/m/status",
                "semanticmodels/status",
            ),
            (
                "/apis/semops.io/v1alpha1/namespaces/a/semanticmodels",
                "semanticmodels",
            ),
            ("/apis/semops.io/v1alpha1/semanticmodels", "semanticmodels"),
            (
                "/apis/apps/v1/namespaces/a/controllerrevisions/m-r1",
                "controllerrevisions",
            ),
            ("/apis/events.k8s.io/v1/namespaces/a/events", "events"),
            ("/api/v1/namespaces/a/secrets/s", "secrets"),
            ("/api/v1/namespaces/a", "namespaces"),
            ("/api/v1/namespaces", "namespaces"),
            (
                "/apis/coordination.k8s.io/v1/namespaces/a/leases/semops",
                "leases",
            ),
            (
                "/apis/authentication.k8s.io/v1/tokenreviews",
                "tokenreviews",
            ),
            ("/apis", "other"),
            ("/api/v1", "other"),
            ("/version", "other"),
            ("/", "other"),
        ] {
            assert_eq!(resource_of(path), want, "{path}");
        }
    }
}
