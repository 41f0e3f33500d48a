//! Which server a round is talking to (docs/design.md#a-check-round, "removal only when sure"). Registrations are
//! recorded on one server and database; a round answered by another one (the Catalog pointed
//! elsewhere, a restore, a MySQL failover) must not turn its absences into removals.

/// How the answering server relates to the one the registrations were recorded on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerVerdict {
    /// Nothing recorded yet (a new Catalog, or one recorded before servers were tracked).
    First,
    /// The same server and database.
    Same,
    /// Another one, accepted by the `semops.io/accept-server` annotation.
    Accepted { recorded: String },
    /// Another one, not accepted: adopted only when every registration is found on it.
    Changed { recorded: String },
}

impl ServerVerdict {
    /// Recorded ids can be compared with (and looked up on) the answering server.
    pub fn same_server(&self) -> bool {
        matches!(self, ServerVerdict::Same)
    }
}

pub fn verdict(recorded: Option<&str>, answering: &str, accepted: Option<&str>) -> ServerVerdict {
    match recorded {
        None => ServerVerdict::First,
        Some(r) if r == answering => ServerVerdict::Same,
        Some(r) if accepted == Some(answering) => ServerVerdict::Accepted {
            recorded: r.to_string(),
        },
        Some(r) => ServerVerdict::Changed {
            recorded: r.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        let changed = |r: &str| ServerVerdict::Changed { recorded: r.into() };
        let cases = [
            (None, "a", None, ServerVerdict::First),
            (Some("a"), "a", None, ServerVerdict::Same),
            (Some("a"), "a", Some("b"), ServerVerdict::Same),
            (Some("a"), "b", None, changed("a")),
            (Some("a"), "b", Some("c"), changed("a")),
            (
                Some("a"),
                "b",
                Some("b"),
                ServerVerdict::Accepted {
                    recorded: "a".into(),
                },
            ),
        ];
        for (recorded, answering, accepted, want) in cases {
            assert_eq!(verdict(recorded, answering, accepted), want);
        }
        assert!(ServerVerdict::Same.same_server());
        assert!(!ServerVerdict::First.same_server());
        assert!(!changed("a").same_server());
    }
}
