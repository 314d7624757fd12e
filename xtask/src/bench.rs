//! `cargo xtask bench`: whole-process benchmarks against a baseline measured in the same run,
//! reported as medians and a ratio (house rule 6). Tests never assert on speed; this does not
//! either — it prints figures for a human to judge.

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    Err(format!(
        "no benchmark is implemented yet (asked for {args:?}); `bench scan` arrives with fsguard's scan"
    ))
}
