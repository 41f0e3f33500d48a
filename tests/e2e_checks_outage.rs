//! PostgreSQL stopped under an AutoRemove policy (its own binary: it stops this binary's server).
//! While it is down every round is CatalogUnreachable and removes nothing, the retry rounds come
//! soon, and when it is back the next round removes what really was dropped.

mod support;

use std::time::Duration;

use support::checks::{World, condition};
use support::db::postgres;
use support::eventually;

#[test]
fn a_stopped_postgresql_removes_nothing_and_recovery_resumes_removals() {
    let w = World::new(
        "outage",
        "CREATE SCHEMA app; CREATE TABLE app.items(id int); CREATE TABLE app.orders(id int);",
        "[{kind: Schema, name: app}, {kind: Table, schema: app, name: items}, {kind: Table, schema: app, name: orders}]",
        "enabled: false, mode: AutoRemove, removeAfter: {misses: 1, grace: 0s}, probe: {timeout: 2s}",
        &[],
    );
    let before = w.check("wh");
    assert_eq!(before["lastCheck"]["result"], "Completed", "{before}");
    w.sql("DROP TABLE app.items;");
    postgres().pg_ctl("stop");
    let down = w.check("wh");
    let restart = || postgres().pg_ctl("start");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        assert_eq!(down["lastCheck"]["result"], "CatalogUnreachable", "{down}");
        assert_eq!(condition(&down, "Reachable").0, "False", "{down}");
        assert_eq!(
            down["registrations"], before["registrations"],
            "states changed while down"
        );
        assert_eq!(w.removed_metric(), 0.0);
        // A second request while down changes nothing either.
        let again = w.check("wh");
        assert_eq!(again["registrations"], before["registrations"]);
    }));
    restart();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    // Recovery is noticed without a recorded round (a dry-run probe every 30 s at most) ...
    eventually(Duration::from_secs(90), "Reachable again", || {
        (condition(&w.catalog("wh")["status"], "Reachable").0 == "True").then_some(())
    });
    // ... and the next round removes what was really dropped, nothing else.
    let after = w.check("wh");
    let states = World::states(&after);
    assert_eq!(
        states,
        vec![
            ("app".to_string(), "Live".to_string()),
            ("items".to_string(), "Removed".to_string()),
            ("orders".to_string(), "Live".to_string()),
        ]
    );
    assert_eq!(w.removed_metric(), 1.0);
}
