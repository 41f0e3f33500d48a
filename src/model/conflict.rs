//! Name conflicts (docs/design.md#name-conflicts-and-home): among models claiming one (catalog, schema, name) in a namespace,
//! the oldest by (creationTimestamp, uid) wins.
//!
//! Every claim competes whether or not its definition is valid, so ownership of a name never
//! flips back and forth as definitions are edited; it moves only when the owner goes away or
//! renames itself.

/// One model's claim on a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim<'a> {
    pub uid: &'a str,
    /// Seconds since the epoch of `metadata.creationTimestamp`; objects not yet created sort last.
    pub created: Option<i64>,
    /// `metadata.name`, used in messages.
    pub object_name: &'a str,
    pub catalog: &'a str,
    pub schema: &'a str,
    pub model_name: &'a str,
}

impl Claim<'_> {
    fn age_key(&self) -> (i64, &str) {
        (self.created.unwrap_or(i64::MAX), self.uid)
    }
    fn same_name(&self, other: &Claim<'_>) -> bool {
        self.catalog == other.catalog
            && self.schema == other.schema
            && self.model_name == other.model_name
    }
}

/// The claim that owns `me`'s name, when it is not `me`.
pub fn conflict_winner<'a>(
    me: &Claim<'_>,
    others: impl IntoIterator<Item = Claim<'a>>,
) -> Option<Claim<'a>> {
    others
        .into_iter()
        .filter(|o| o.uid != me.uid && o.same_name(me) && o.age_key() < me.age_key())
        .min_by(|a, b| a.age_key().cmp(&b.age_key()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim<'a>(uid: &'a str, created: Option<i64>, name: &'a str) -> Claim<'a> {
        Claim {
            uid,
            created,
            object_name: uid,
            catalog: "analytics",
            schema: "semantic",
            model_name: name,
        }
    }

    #[test]
    fn the_older_claim_wins_and_the_younger_loses() {
        let old = claim("b", Some(10), "m");
        let young = claim("a", Some(20), "m");
        assert_eq!(conflict_winner(&young, [old.clone()]), Some(old.clone()));
        assert_eq!(conflict_winner(&old, [young]), None);
    }

    #[test]
    fn equal_timestamps_fall_back_to_uid() {
        let a = claim("a", Some(10), "m");
        let b = claim("b", Some(10), "m");
        assert_eq!(conflict_winner(&b, [a.clone()]), Some(a.clone()));
        assert_eq!(conflict_winner(&a, [b]), None);
    }

    #[test]
    fn different_names_schemas_or_catalogs_do_not_conflict_and_case_matters() {
        let me = claim("z", Some(99), "m");
        let mut other_schema = claim("a", Some(1), "m");
        other_schema.schema = "other";
        let mut other_catalog = claim("b", Some(1), "m");
        other_catalog.catalog = "other";
        let other_case = claim("c", Some(1), "M");
        assert_eq!(
            conflict_winner(&me, [other_schema, other_catalog, other_case]),
            None
        );
    }

    #[test]
    fn among_several_older_claims_the_oldest_is_named() {
        let me = claim("z", Some(30), "m");
        let winner = conflict_winner(
            &me,
            [
                claim("x", Some(20), "m"),
                claim("y", Some(5), "m"),
                claim("w", None, "m"),
            ],
        );
        assert_eq!(winner.map(|c| c.uid), Some("y"));
    }

    #[test]
    fn a_claim_never_conflicts_with_itself() {
        let me = claim("a", Some(1), "m");
        assert_eq!(conflict_winner(&me, [me.clone()]), None);
    }
}
