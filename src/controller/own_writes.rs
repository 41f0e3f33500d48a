//! The watch event of a model's own status write carries the object exactly as the reconcile
//! that wrote it left it (the PUT is preconditioned on the version that reconcile read), so a
//! reconcile of it would find nothing to do. At bring-up that was every second reconcile.
//! Everything else that can change a model's outcome (its Catalogs, rivals for its name, check
//! rounds) triggers the model on its own, so skipping that one event loses nothing.

use std::collections::HashMap;
use std::sync::Mutex;

/// The resourceVersion of the last status write per object uid, until its watch event is seen.
#[derive(Default)]
pub struct OwnWrites(Mutex<HashMap<String, String>>);

impl OwnWrites {
    /// This process wrote `uid`'s status and the server answered with `resource_version`.
    pub fn record(&self, uid: &str, resource_version: String) {
        self.lock().insert(uid.to_owned(), resource_version);
    }

    /// Whether the watched state (`uid` at `resource_version`) should trigger a reconcile:
    /// false only for the very version this process wrote. Any event of the object ends the
    /// record: a later version means someone else wrote since, and an event that raced ahead of
    /// the record costs one reconcile, as it did before this filter.
    pub fn triggers(&self, uid: Option<&str>, resource_version: Option<&str>) -> bool {
        let (Some(uid), Some(version)) = (uid, resource_version) else {
            return true;
        };
        match self.lock().remove(uid) {
            Some(own) => own != version,
            None => true,
        }
    }

    /// Objects whose own write was recorded and not seen yet.
    #[cfg(test)]
    fn pending(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        // A panic while holding this lock cannot leave the map inconsistent.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::OwnWrites;

    #[test]
    fn only_the_written_version_is_skipped_and_only_once() {
        // (recorded writes, watched events in order, whether each triggers, records left)
        type Case = (
            &'static [(&'static str, &'static str)],
            &'static [(Option<&'static str>, Option<&'static str>, bool)],
            usize,
        );
        let cases: &[Case] = &[
            // Our write comes back: skipped.
            (&[("a", "5")], &[(Some("a"), Some("5"), false)], 0),
            // Nothing recorded: everything triggers.
            (&[], &[(Some("a"), Some("5"), true)], 0),
            // Someone wrote after us: their version triggers and ends our record.
            (
                &[("a", "5")],
                &[(Some("a"), Some("6"), true), (Some("a"), Some("5"), true)],
                0,
            ),
            // The same version seen twice (a relist): the second one triggers.
            (
                &[("a", "5")],
                &[(Some("a"), Some("5"), false), (Some("a"), Some("5"), true)],
                0,
            ),
            // Another object's event does not touch the record.
            (&[("a", "5")], &[(Some("b"), Some("5"), true)], 1),
            // A later write replaces the earlier record.
            (
                &[("a", "5"), ("a", "7")],
                &[(Some("a"), Some("7"), false)],
                0,
            ),
            // Without a uid or a version nothing is known: it triggers and keeps the record.
            (
                &[("a", "5")],
                &[(None, Some("5"), true), (Some("a"), None, true)],
                1,
            ),
        ];
        for (i, (writes, events, left)) in cases.iter().enumerate() {
            let own = OwnWrites::default();
            for (uid, rv) in *writes {
                own.record(uid, rv.to_string());
            }
            for (uid, rv, want) in *events {
                assert_eq!(own.triggers(*uid, *rv), *want, "case {i}: {uid:?}@{rv:?}");
            }
            assert_eq!(own.pending(), *left, "case {i}: records left");
        }
    }
}
