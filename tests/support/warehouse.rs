//! A small shop warehouse, generated from a fixed seed, loaded into PostgreSQL (schema `wh`) and
//! MariaDB (database `wh`) for the query-compiler tests. Its shape is chosen to catch wrong SQL:
//! orders have several lines (a naive join double counts), some orders have no customer and some
//! customers no segment (NULL groups), amounts repeat (ties), and dates spread over two years
//! (every grain has several buckets).
#![allow(dead_code)]

/// PostgreSQL or MariaDB: the few column types that differ.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Postgres,
    Mariadb,
}

/// A deterministic generator (64-bit LCG); the same rows on every machine.
struct Seeded(u64);

impl Seeded {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

pub const REGIONS: &[&str] = &["north", "south", "east", "west", "islands"];
const SEGMENTS: &[&str] = &["retail", "trade", "public"];
const STATUSES: &[&str] = &["paid", "shipped", "cancelled", "returned"];
const CATEGORIES: &[&str] = &["tools", "garden", "kitchen", "paint"];

fn date(day: u64) -> String {
    // Days from 2024-01-01, through a civil-calendar walk (no date crate in tests).
    let mut y = 2024;
    let mut d = day as i64;
    loop {
        let len = if y % 4 == 0 { 366 } else { 365 };
        if d < len {
            break;
        }
        d -= len;
        y += 1;
    }
    let months = [
        31,
        if y % 4 == 0 { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    let mut m = 0;
    while d >= months[m] {
        d -= months[m];
        m += 1;
    }
    format!("{y}-{:02}-{:02}", m + 1, d + 1)
}

/// DDL and rows as one SQL script for the tables of `schema` (a PostgreSQL schema or a MariaDB
/// database, created by the caller).
pub fn script(flavor: Flavor, schema: &str) -> String {
    let timestamp = match flavor {
        Flavor::Postgres => "TIMESTAMP",
        Flavor::Mariadb => "DATETIME",
    };
    let mut r = Seeded(20_241_206);
    let mut sql = format!(
        "CREATE TABLE {schema}.regions (region_id INTEGER PRIMARY KEY, name VARCHAR(40) NOT NULL);
CREATE TABLE {schema}.customers (customer_id INTEGER PRIMARY KEY, region_id INTEGER, segment VARCHAR(40), signed_up_on DATE NOT NULL, vip BOOLEAN NOT NULL);
CREATE TABLE {schema}.orders (order_id INTEGER PRIMARY KEY, customer_id INTEGER, ordered_at {timestamp} NOT NULL, status VARCHAR(20) NOT NULL, amount NUMERIC(10,2) NOT NULL, web BOOLEAN NOT NULL);
CREATE TABLE {schema}.products (product_id INTEGER PRIMARY KEY, category VARCHAR(40) NOT NULL, launched_on DATE NOT NULL);
CREATE TABLE {schema}.order_lines (line_id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL, product_id INTEGER NOT NULL, quantity INTEGER NOT NULL, unit_price NUMERIC(10,2) NOT NULL);
CREATE TABLE {schema}.refunds (refund_id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL, amount NUMERIC(10,2) NOT NULL, refunded_at {timestamp} NOT NULL);
"
    );
    let mut insert = |table: &str, rows: Vec<String>| {
        sql.push_str(&format!(
            "INSERT INTO {schema}.{table} VALUES\n  {};\n",
            rows.join(",\n  ")
        ));
    };
    insert(
        "regions",
        REGIONS
            .iter()
            .enumerate()
            .map(|(i, n)| format!("({}, '{n}')", i + 1))
            .collect(),
    );
    let customers = 80;
    insert(
        "customers",
        (1..=customers)
            .map(|c| {
                // Region 5 has no customers in some runs of the seed; customer 7 has no region.
                let region = if c == 7 {
                    "NULL".to_string()
                } else {
                    (1 + r.next(4)).to_string()
                };
                let segment = match r.next(5) {
                    4 => "NULL".to_string(),
                    s => format!("'{}'", SEGMENTS[s as usize % 3]),
                };
                let vip = if r.next(4) == 0 { "TRUE" } else { "FALSE" };
                format!("({c}, {region}, {segment}, '{}', {vip})", date(r.next(700)))
            })
            .collect(),
    );
    let products = 24;
    insert(
        "products",
        (1..=products)
            .map(|p| {
                format!(
                    "({p}, '{}', '{}')",
                    CATEGORIES[r.next(4) as usize],
                    date(r.next(600))
                )
            })
            .collect(),
    );
    let orders = 500;
    let mut order_rows = Vec::new();
    let mut line_rows = Vec::new();
    let mut refund_rows = Vec::new();
    let mut line_id = 0;
    for o in 1..=orders {
        // One order in ten is a guest's (no customer).
        let customer = if r.next(10) == 0 {
            "NULL".to_string()
        } else {
            (1 + r.next(customers)).to_string()
        };
        let day = r.next(730);
        let at = format!("{} {:02}:{:02}:00", date(day), r.next(24), r.next(60));
        // Amounts from a short list, so groups tie.
        let amount = [19.99, 25.00, 49.50, 120.00, 7.25][r.next(5) as usize];
        let status = STATUSES[r.next(4) as usize];
        let web = if r.next(3) == 0 { "FALSE" } else { "TRUE" };
        order_rows.push(format!(
            "({o}, {customer}, '{at}', '{status}', {amount:.2}, {web})"
        ));
        for _ in 0..1 + r.next(4) {
            line_id += 1;
            line_rows.push(format!(
                "({line_id}, {o}, {}, {}, {:.2})",
                1 + r.next(products),
                1 + r.next(6),
                [2.5, 3.75, 10.0, 0.99][r.next(4) as usize]
            ));
        }
        if status == "returned" || r.next(20) == 0 {
            refund_rows.push(format!(
                "({}, {o}, {:.2}, '{} 12:00:00')",
                refund_rows.len() + 1,
                amount / 2.0,
                date(day + r.next(30))
            ));
        }
    }
    insert("orders", order_rows);
    insert("order_lines", line_rows);
    insert("refunds", refund_rows);
    sql
}
