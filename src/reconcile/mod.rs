//! Stale-registration checks (DESIGN 5). This room holds the pure decisions of a round; the
//! scheduling loop and the Catalog-controller wiring are not built yet (README, Status).

pub mod round;
