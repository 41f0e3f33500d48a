//! A sorted set in one exactly sized `Vec`, for the indexes' per-name sets: each holds one model
//! object nearly always (two models claiming one name is a conflict), and a `BTreeSet` spends a
//! 192-byte node on that one entry where this spends 16 bytes. Inserts and removals move the
//! tail, so it suits sets of a few entries only.

use std::borrow::Borrow;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmallSet<T>(Vec<T>);

impl<T> Default for SmallSet<T> {
    fn default() -> Self {
        SmallSet(Vec::new())
    }
}

impl<T: Ord> SmallSet<T> {
    /// Adds `value`; false when it was there already.
    pub fn insert(&mut self, value: T) -> bool {
        match self.0.binary_search(&value) {
            Ok(_) => false,
            Err(at) => {
                // Exact growth: a set of one must not keep room for four.
                self.0.reserve_exact(1);
                self.0.insert(at, value);
                true
            }
        }
    }

    /// Removes `value`; false when it was not there.
    pub fn remove<Q: Ord + ?Sized>(&mut self, value: &Q) -> bool
    where
        T: Borrow<Q>,
    {
        match self.0.binary_search_by(|v| v.borrow().cmp(value)) {
            Ok(at) => {
                self.0.remove(at);
                self.0.shrink_to_fit();
                true
            }
            Err(_) => false,
        }
    }

    /// The element equal to `value`.
    pub fn get<Q: Ord + ?Sized>(&self, value: &Q) -> Option<&T>
    where
        T: Borrow<Q>,
    {
        self.0
            .binary_search_by(|v| v.borrow().cmp(value))
            .ok()
            .map(|at| &self.0[at])
    }
}

impl<T> SmallSet<T> {
    /// In ascending order.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.0.iter()
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'a, T> IntoIterator for &'a SmallSet<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// Any sequence of inserts and removals leaves what a `BTreeSet` would hold, in the
        /// same order, with no spare room kept.
        #[test]
        fn behaves_as_a_btree_set(ops in prop::collection::vec((any::<bool>(), 0u8..8), 0..64)) {
            let (mut small, mut btree) = (SmallSet::default(), BTreeSet::new());
            for (insert, v) in ops {
                if insert {
                    prop_assert_eq!(small.insert(v), btree.insert(v));
                } else {
                    prop_assert_eq!(small.remove(&v), btree.remove(&v));
                }
                prop_assert!(small.iter().eq(btree.iter()));
                prop_assert_eq!(small.len(), btree.len());
                prop_assert_eq!(small.0.capacity(), small.len());
                for probe in 0u8..8 {
                    prop_assert_eq!(small.get(&probe), btree.get(&probe));
                }
            }
        }
    }
}
