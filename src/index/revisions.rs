//! Accepted definitions of models whose spec has moved past their accepted generation, by
//! (model uid, revision). A revision never changes once written, so an entry never goes stale;
//! the map is bounded and dropped whole when full (entries are cheap to read again).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::crd::semantic_model::Definition;

/// Most definitions held.
pub const LIMIT: usize = 4096;

#[derive(Default)]
pub struct RevisionCache {
    entries: Mutex<HashMap<(String, i64), Arc<Definition>>>,
}

impl RevisionCache {
    pub fn get(&self, uid: &str, revision: i64) -> Option<Arc<Definition>> {
        self.entries
            .lock()
            .expect("revision cache poisoned")
            .get(&(uid.to_string(), revision))
            .cloned()
    }

    pub fn put(&self, uid: &str, revision: i64, definition: Arc<Definition>) {
        let mut map = self.entries.lock().expect("revision cache poisoned");
        if map.len() >= LIMIT {
            map.clear();
        }
        map.insert((uid.to_string(), revision), definition);
    }

    pub fn len(&self) -> usize {
        self.entries.lock().expect("revision cache poisoned").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_found_by_uid_and_revision_and_the_cache_stays_bounded() {
        let c = RevisionCache::default();
        c.put("u", 3, Arc::new(Definition::default()));
        assert!(c.get("u", 3).is_some());
        assert!(c.get("u", 4).is_none() && c.get("v", 3).is_none());
        for i in 0..(LIMIT as i64 + 10) {
            c.put("w", i, Arc::new(Definition::default()));
        }
        assert!(c.len() <= LIMIT);
    }
}
