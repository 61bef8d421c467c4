use super::{Outcome, Rule};
use crate::facts::redis::RedisFacts;
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Finding, Severity};
use crate::units::human_bytes;

pub(crate) const RULE: Rule = Rule {
    id: "redis-maxmemory-unset",
    severity: Severity::Warning,
    title: "Redis or Valkey runs without a maxmemory that fits the container's memory limit",
    doc: include_str!("../../rules/redis-maxmemory-unset.md"),
    tags: &["memory", "kubernetes", "oom", "redis"],
    check,
    anchor: Anchor::MemoryLimit,
};

/// The share of the limit the fix gives `maxmemory` (5/8: 160 MiB of 256 MiB), leaving room for
/// Redis's own buffers, fragmentation and a persistence fork's copied pages.
const FIX_EIGHTHS: u64 = 5;
/// Past this share of the limit, with persistence on, a save fork can take the container over.
const PERSISTENCE_PERCENT: u64 = 75;

fn check(f: &Facts) -> Outcome {
    let Some(r) = &f.redis else {
        return Outcome::none();
    };
    if let Some(why) = &r.undecided {
        return Outcome::undecided(why.clone());
    }
    let limited = f
        .container
        .as_ref()
        .and_then(|c| c.limits_memory.as_ref().filter(|l| l.value.value > 0).map(|l| (c, l)));
    let Some((c, limit)) = limited else {
        // No limit to judge against: only an unset maxmemory is worth a word.
        return match maxmemory(r) {
            None => Outcome::one(unbounded(f, r)),
            Some(_) => Outcome::none(),
        };
    };
    let limit_bytes = limit.value.value;
    let limit_text = format!("limits.memory {} ({})", limit.value.text, human_bytes(limit_bytes));
    let suggested = suggestion(limit_bytes);
    let finding = match maxmemory(r) {
        None => RULE.finding(format!(
            "{} runs without maxmemory under the container's {limit_text}: it grows until the container is OOM-killed instead of evicting keys or refusing writes",
            r.server
        )),
        Some(bytes) if bytes >= limit_bytes => RULE
            .finding(format!(
                "{}'s maxmemory {} reaches the container's {limit_text}: its buffers and fragmentation come on top and the container is OOM-killed before Redis evicts or refuses a write",
                r.server,
                describe(r)
            ))
            .severity(Severity::Error),
        Some(bytes) if r.persists() && u128::from(bytes) * 100 > u128::from(limit_bytes) * u128::from(PERSISTENCE_PERCENT) => {
            RULE.finding(format!(
                "{}'s maxmemory {} is {} % of the container's {limit_text} while it persists: the save fork's copied pages can double what it holds and the container is OOM-killed",
                r.server,
                describe(r),
                u128::from(bytes) * 100 / u128::from(limit_bytes)
            ))
        }
        Some(_) => return Outcome::none(),
    };
    Outcome::one(
        finding
            .evidence(Evidence::plain(found(r)))
            .evidence(Evidence::plain(r.persistence()))
            .evidence(super::k8s::limit_evidence(c, "memory", limit))
            .fix(manifest_fix(r, &suggested)),
    )
}

/// `maxmemory` in bytes, when it bounds anything (`0` is no limit).
fn maxmemory(r: &RedisFacts) -> Option<u64> {
    r.maxmemory_bytes.filter(|b| *b > 0)
}

fn describe(r: &RedisFacts) -> String {
    match &r.maxmemory {
        Some(m) => format!("{} (from {})", m.value, m.source),
        None => "unset".into(),
    }
}

fn found(r: &RedisFacts) -> String {
    let conf = match &r.config_file {
        Some(c) => format!(", config file {c}"),
        None => ", no config file".into(),
    };
    let maxmemory = match &r.maxmemory {
        Some(m) => format!("maxmemory {} from {}", m.value, m.source),
        None => "no maxmemory in the config file or the arguments".into(),
    };
    format!("{} ({} layout): {}{conf}; {maxmemory}", r.server, r.layout, r.found_by)
}

/// `maxmemory` for a limit of `limit` bytes, in Redis's `mb` (MiB).
fn suggestion(limit: u64) -> String {
    format!("{}mb", (limit / 8 * FIX_EIGHTHS) >> 20)
}

/// The flags that bound the server, appended to its arguments.
fn flags(size: &str) -> [String; 4] {
    [
        "--maxmemory".into(),
        size.into(),
        "--maxmemory-policy".into(),
        "allkeys-lru".into(),
    ]
}

/// The manifest's `args` with the flags, and the config-file lines as the other way.
fn manifest_fix(r: &RedisFacts, size: &str) -> String {
    let mut args = r.cmd.clone();
    if !r.server_in_cmd && args.is_empty() && r.layout == "official" {
        args.push(r.server.clone());
    }
    args.extend(flags(size));
    let json = serde_json::to_string(&args).unwrap_or_else(|_| "[…]".into());
    let mut fix = format!(
        "# in the container (args replace the image's Cmd):\nargs: {json}\n# maxmemory-policy allkeys-lru evicts keys; noeviction refuses writes instead (for a store that must not lose keys)"
    );
    if let Some(conf) = &r.config_file {
        fix.push_str(&format!("\n# or in {conf}:\n# maxmemory {size}\n# maxmemory-policy allkeys-lru"));
    }
    fix
}

/// Without a limit: Redis sizes from nothing.
fn unbounded(f: &Facts, r: &RedisFacts) -> Finding {
    let mut cmd = r.cmd.clone();
    cmd.extend(flags("160mb"));
    let cmd = serde_json::to_string(&cmd).unwrap_or_else(|_| "[…]".into());
    let limit = match &f.container {
        Some(_) => "the container sets no memory limit either",
        None => "lint it with --k8s to judge it against the container's memory limit",
    };
    RULE.finding(format!(
        "{} runs without maxmemory: it takes memory until something kills it, never evicting keys or refusing writes ({limit})",
        r.server
    ))
    .severity(Severity::Note)
    .anchor(Anchor::Command)
    .evidence(Evidence::plain(found(r)))
    .evidence(Evidence::plain(r.persistence()))
    .fix(format!(
        "CMD {cmd}\n# 160mb fits a 256Mi limit: about 5/8 of the container's limit"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    fn debian(cmd: &[&str]) -> TestImage {
        TestImage::new()
            .glibc()
            .program("/usr/bin/redis-check-rdb")
            .symlink("/usr/bin/redis-server", "redis-check-rdb")
            .file("/etc/redis/redis.conf", "daemonize yes\nappendonly no\n")
            .entrypoint(&["redis-server"])
            .cmd(cmd)
    }

    fn limit(memory: &str, args: &str) -> String {
        format!("    resources:\n      limits: {{memory: {memory}}}\n{args}")
    }

    #[test]
    fn unset_under_a_limit_warns_with_the_args_that_fix_it() {
        let image = debian(&["/etc/redis/redis.conf", "--daemonize", "no"]);
        let o = check(&image.facts_in(&limit("256Mi", "")));
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.message.starts_with("redis-server runs without maxmemory under the container's limits.memory 256Mi (256 MiB)"), "{}", f.message);
        assert!(
            f.fix.contains(r#"args: ["/etc/redis/redis.conf","--daemonize","no","--maxmemory","160mb","--maxmemory-policy","allkeys-lru"]"#),
            "{}",
            f.fix
        );
        assert!(f.fix.contains("# or in /etc/redis/redis.conf:\n# maxmemory 160mb"), "{}", f.fix);
        // The fix's args silence it.
        let fixed = limit("256Mi", "    args: [\"--maxmemory\", \"160mb\", \"--maxmemory-policy\", \"allkeys-lru\"]\n");
        let o = check(&image.facts_in(&fixed));
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
    }

    #[test]
    fn a_maxmemory_that_reaches_the_limit_is_an_error_and_persistence_lowers_the_bar() {
        let at = debian(&["--maxmemory", "256mb"]);
        let o = check(&at.facts_in(&limit("256Mi", "")));
        assert_eq!(o.sole_finding().severity, Severity::Error);
        assert!(o.sole_finding().message.contains("maxmemory 256mb (from the command line)"), "{o:?}");
        // 200mb is 78 % of 256Mi: a warning while the default save schedule is on, silent without.
        let o = check(&debian(&["--maxmemory", "200mb"]).facts_in(&limit("256Mi", "")));
        assert!(o.sole_finding().message.contains("78 % of the container's"), "{o:?}");
        let o = check(&debian(&["--maxmemory", "200mb", "--save", ""]).facts_in(&limit("256Mi", "")));
        assert!(o.findings.is_empty(), "{o:?}");
        let o = check(&debian(&["--maxmemory", "200mb", "--save", "", "--appendonly", "yes"]).facts_in(&limit("256Mi", "")));
        assert_eq!(o.findings.len(), 1, "{o:?}");
    }

    #[test]
    fn alone_it_notes_an_unset_maxmemory_only() {
        let o = check(&debian(&[]).facts());
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Note);
        assert!(f.message.contains("lint it with --k8s"), "{}", f.message);
        assert!(check(&debian(&["--maxmemory", "1gb"]).facts()).findings.is_empty());
        // A config file mounted at run time: undecided.
        let o = check(&debian(&["/data/redis.conf"]).facts_in(&limit("256Mi", "")));
        assert!(o.findings.is_empty() && o.undecided.is_some(), "{o:?}");
    }
}
