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
        assert!(c.is_empty());
        c.put("u", 3, Arc::new(Definition::default()));
        assert!(c.get("u", 3).is_some());
        assert!(c.get("u", 4).is_none() && c.get("v", 3).is_none());
        assert_eq!((c.len(), c.is_empty()), (1, false));
        // Filled to the limit, it holds every entry; the next one starts it over.
        for i in 1..LIMIT as i64 {
            c.put("w", i, Arc::new(Definition::default()));
        }
        assert_eq!(c.len(), LIMIT);
        assert!(c.get("u", 3).is_some());
        c.put("w", 0, Arc::new(Definition::default()));
        assert_eq!(c.len(), 1);
        assert!(c.get("w", 0).is_some() && c.get("u", 3).is_none());
    }
}
