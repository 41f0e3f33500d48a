//! A sorted set in one exactly sized `Vec`, for the indexes' per-name sets: each holds one model
//! object nearly always (two models claiming one name is a conflict), and a `BTreeSet` spends a
//! 192-byte node on that one entry where this spends 16 bytes. Inserts and removals move the
//! tail, so it suits sets of a few entries only.

use std::borrow::Borrow;
use std::collections::BTreeSet;

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

/// A sorted set that is a [`SmallSet`] while it is small and a `BTreeSet` once it grows past
/// [`TIERED_SMALL_MAX`]: a source bound by a few dozen models costs exactly its entries (a
/// B-tree spent ~75 bytes on each 40-byte entry), one bound by thousands keeps logarithmic
/// inserts. It returns to the small form only below half the limit, so a set that hovers at the
/// limit does not convert back and forth.
#[derive(Clone, Debug)]
pub enum TieredSet<T> {
    Small(SmallSet<T>),
    Large(BTreeSet<T>),
}

/// Entries a [`TieredSet`] holds in its small form at most.
pub const TIERED_SMALL_MAX: usize = 64;

impl<T> Default for TieredSet<T> {
    fn default() -> Self {
        TieredSet::Small(SmallSet::default())
    }
}

impl<T: Ord> TieredSet<T> {
    /// Adds `value`; false when it was there already.
    pub fn insert(&mut self, value: T) -> bool {
        match self {
            TieredSet::Large(set) => set.insert(value),
            TieredSet::Small(small) => {
                let added = small.insert(value);
                if small.len() > TIERED_SMALL_MAX {
                    let entries = std::mem::take(&mut small.0);
                    *self = TieredSet::Large(entries.into_iter().collect());
                }
                added
            }
        }
    }

    /// Keeps the entries `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        match self {
            TieredSet::Small(small) => {
                small.0.retain(|v| keep(v));
                small.0.shrink_to_fit();
            }
            TieredSet::Large(set) => {
                set.retain(|v| keep(v));
                if set.len() <= TIERED_SMALL_MAX / 2 {
                    let entries: Vec<T> = std::mem::take(set).into_iter().collect();
                    *self = TieredSet::Small(SmallSet(entries));
                }
            }
        }
    }
}

impl<T> TieredSet<T> {
    /// In ascending order.
    pub fn iter(&self) -> TieredIter<'_, T> {
        match self {
            TieredSet::Small(small) => TieredIter::Small(small.0.iter()),
            TieredSet::Large(set) => TieredIter::Large(set.iter()),
        }
    }
    pub fn len(&self) -> usize {
        match self {
            TieredSet::Small(small) => small.len(),
            TieredSet::Large(set) => set.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A [`TieredSet`]'s entries in ascending order.
pub enum TieredIter<'a, T> {
    Small(std::slice::Iter<'a, T>),
    Large(std::collections::btree_set::Iter<'a, T>),
}

impl<'a, T> Iterator for TieredIter<'a, T> {
    type Item = &'a T;
    fn next(&mut self) -> Option<&'a T> {
        match self {
            TieredIter::Small(it) => it.next(),
            TieredIter::Large(it) => it.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    /// The form at each edge: small up to the limit, large past it, small again only at half.
    #[test]
    fn tiered_form_changes_at_the_limit_and_back_at_half() {
        let is_large = |t: &TieredSet<usize>| matches!(t, TieredSet::Large(_));
        let mut t = TieredSet::default();
        for v in 0..TIERED_SMALL_MAX {
            t.insert(v);
        }
        assert!(!is_large(&t), "{TIERED_SMALL_MAX} entries stay small");
        t.insert(TIERED_SMALL_MAX);
        assert!(is_large(&t), "one more is large");
        t.retain(|v| *v > 0);
        assert!(is_large(&t), "{} entries stay large", t.len());
        t.retain(|v| *v > TIERED_SMALL_MAX - TIERED_SMALL_MAX / 2 - 1);
        assert_eq!(t.len(), TIERED_SMALL_MAX / 2 + 1);
        assert!(is_large(&t), "just above half stays large");
        t.retain(|v| *v > TIERED_SMALL_MAX - TIERED_SMALL_MAX / 2);
        assert_eq!(t.len(), TIERED_SMALL_MAX / 2);
        assert!(!is_large(&t), "half is small again");
        assert!(
            t.iter()
                .copied()
                .eq(TIERED_SMALL_MAX / 2 + 1..=TIERED_SMALL_MAX)
        );
    }

    proptest! {
        /// Inserts and removals across both forms (sets grow past the small limit and shrink
        /// back) leave what a `BTreeSet` would hold, in the same order; the small form keeps no
        /// spare room, and the form follows the limit with its hysteresis.
        #[test]
        fn tiered_behaves_as_a_btree_set(
            ops in prop::collection::vec((0u8..4, 0u16..160), 0..600)
        ) {
            let (mut tiered, mut btree) = (TieredSet::default(), BTreeSet::new());
            for (op, v) in ops {
                if op < 3 {
                    prop_assert_eq!(tiered.insert(v), btree.insert(v));
                } else {
                    // Removes a band of values, as a model leaving every source does.
                    tiered.retain(|x| x / 16 != v / 16);
                    btree.retain(|x| x / 16 != v / 16);
                }
                prop_assert!(tiered.iter().eq(btree.iter()));
                prop_assert_eq!(tiered.len(), btree.len());
                match &tiered {
                    TieredSet::Small(small) => {
                        prop_assert!(small.len() <= TIERED_SMALL_MAX);
                        prop_assert_eq!(small.0.capacity(), small.len());
                    }
                    TieredSet::Large(set) => prop_assert!(set.len() > TIERED_SMALL_MAX / 2),
                }
            }
        }
    }
}
