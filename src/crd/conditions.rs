//! Conditions per the Kubernetes API conventions, computed purely from the previous list.
//!
//! `lastTransitionTime` moves only when a condition's status flips, so a reconcile that finds
//! nothing new produces exactly the previous list and the controller sends no write.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Tri-state condition status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    True,
    False,
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }
    pub fn from_bool(b: bool) -> Self {
        if b { Status::True } else { Status::False }
    }
}

/// A condition as a controller decides it, before timestamps are attached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    pub type_: &'static str,
    pub status: Status,
    pub reason: String,
    pub message: String,
}

impl Desired {
    pub fn new(
        type_: &'static str,
        status: Status,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            status,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// Builds the new condition list from the desired ones, keeping each previous
/// `lastTransitionTime` when the status did not flip. Order follows `desired`.
pub fn merge(
    previous: &[Condition],
    desired: Vec<Desired>,
    generation: Option<i64>,
    now: &Time,
) -> Vec<Condition> {
    desired
        .into_iter()
        .map(|d| {
            let old = previous.iter().find(|c| c.type_ == d.type_);
            let last_transition_time = match old {
                Some(c) if c.status == d.status.as_str() => c.last_transition_time.clone(),
                _ => now.clone(),
            };
            Condition {
                type_: d.type_.to_string(),
                status: d.status.as_str().to_string(),
                reason: d.reason,
                message: d.message,
                observed_generation: generation,
                last_transition_time,
            }
        })
        .collect()
}

/// The condition of `type_`, if present.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is present with status True.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn transition_time_is_kept_while_status_holds_and_moves_on_a_flip() {
        let first = merge(
            &[],
            vec![Desired::new("Ready", Status::False, "Invalid", "x")],
            Some(1),
            &at(10),
        );
        assert_eq!(first[0].last_transition_time, at(10));

        let same_status_new_reason = merge(
            &first,
            vec![Desired::new("Ready", Status::False, "NameConflict", "y")],
            Some(2),
            &at(20),
        );
        assert_eq!(same_status_new_reason[0].last_transition_time, at(10));
        assert_eq!(same_status_new_reason[0].reason, "NameConflict");
        assert_eq!(same_status_new_reason[0].observed_generation, Some(2));

        let flipped = merge(
            &same_status_new_reason,
            vec![Desired::new("Ready", Status::True, "Accepted", "")],
            Some(2),
            &at(30),
        );
        assert_eq!(flipped[0].last_transition_time, at(30));
    }

    #[test]
    fn unchanged_desired_conditions_reproduce_the_previous_list_exactly() {
        let desired = || {
            vec![
                Desired::new("Ready", Status::True, "Accepted", "ok"),
                Desired::new("Valid", Status::True, "Valid", ""),
            ]
        };
        let first = merge(&[], desired(), Some(3), &at(10));
        let again = merge(&first, desired(), Some(3), &at(99));
        assert_eq!(first, again);
    }
}
