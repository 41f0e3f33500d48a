//! The scripted API server of `crate::mock_api` with a controller [`Context`] around it.

pub use crate::mock_api::{Seen, client, status};

use super::{Context, ContextConfig};
use crate::leader::LeaderHandle;
use crate::stores::Stores;

/// Empty caches.
pub fn stores() -> Stores {
    Stores {
        models: kube::runtime::reflector::store().0,
        catalogs: kube::runtime::reflector::store().0,
        policies: kube::runtime::reflector::store().0,
        claims: Default::default(),
    }
}

/// A context over `client` that leads (or, with `leading: false`, never does).
pub fn context(client: kube::Client, leading: bool) -> Context {
    let leader = if leading {
        LeaderHandle::always()
    } else {
        LeaderHandle::never()
    };
    Context::new(ContextConfig::new(client, stores(), leader))
}
