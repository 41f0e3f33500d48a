//! The `semops` binary: operator, CRD generator, offline validator and read-API client. The
//! command line lives in `semops::cli`.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    semops::cli::main()
}
