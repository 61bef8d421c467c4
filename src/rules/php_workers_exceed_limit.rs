use super::{Outcome, Rule};
use crate::facts::php::{PhpPool, PhpServer, Workers};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Finding, Severity};
use crate::units::human_bytes;

pub(crate) const RULE: Rule = Rule {
    id: "php-workers-exceed-limit",
    severity: Severity::Warning,
    title: "PHP workers × memory_limit exceed the container's memory limit",
    doc: include_str!("../../rules/php-workers-exceed-limit.md"),
    tags: &["memory", "kubernetes", "php"],
    check,
    anchor: Anchor::MemoryLimit,
};

/// What the master process, the shared opcache and the C library take besides the children's
/// `memory_limit`s: kept out of the budget the children share.
pub(crate) const OVERHEAD: u64 = 64 << 20;
/// The `pm.max_requests` (Apache: `MaxConnectionsPerChild`) the fix proposes when none is set:
/// a child is replaced after this many requests, so what it leaks is given back.
pub(crate) const MAX_REQUESTS: u64 = 500;

fn check(f: &Facts) -> Outcome {
    let Some(php) = &f.php else {
        return Outcome::none();
    };
    let Some(limit) = f.memory.limit_bytes() else {
        return Outcome::undecided(format!(
            "PHP's workers are judged against the container's memory limit: {}",
            match &f.memory.limit {
                crate::facts::memory::Amount::Undecided { why } => why.clone(),
                crate::facts::memory::Amount::Set { .. } => "it is 0 (no limit)".into(),
            }
        ));
    };
    let budget = limit.saturating_sub(OVERHEAD);
    let mut findings = Vec::new();
    let mut undecided = Vec::new();
    for server in &php.servers {
        undecided.extend(server.undecided.iter().cloned());
        for pool in &server.pools {
            let (count, count_setting) = match &pool.workers {
                Workers::Set { count, setting } => (*count, setting.as_ref()),
                Workers::Undecided { why } => {
                    undecided.push(why.clone());
                    continue;
                }
            };
            let Some(ml) = &pool.memory_limit else {
                undecided.push(pool.memory_limit_undecided.clone().unwrap_or_default());
                continue;
            };
            let total = ml.bytes.map(|b| b.saturating_mul(count));
            if !ml.unbounded && total.is_none_or(|t| t <= budget) {
                if total.is_none() {
                    undecided.push(format!("memory_limit `{}` is not a size memlint reads", ml.text));
                }
                continue;
            }
            findings.push(finding(f, server, pool, count, count_setting, ml, limit, budget));
        }
    }
    if findings.is_empty() && !undecided.is_empty() {
        return Outcome::undecided(undecided.join("; "));
    }
    findings.into()
}

#[allow(clippy::too_many_arguments)]
fn finding(
    f: &Facts,
    server: &PhpServer,
    pool: &PhpPool,
    count: u64,
    count_setting: Option<&crate::facts::php::Setting>,
    ml: &crate::facts::php::MemoryLimit,
    limit: u64,
    budget: u64,
) -> Finding {
    let limit_text = match &f.memory.limit {
        crate::facts::memory::Amount::Set { text, .. } => text.clone(),
        crate::facts::memory::Amount::Undecided { .. } => human_bytes(limit),
    };
    let fpm = server.kind == "php-fpm";
    let who = if fpm {
        format!("PHP-FPM pool `{}`", pool.name)
    } else {
        "Apache prefork (mod_php)".to_string()
    };
    // The memory_limit the fix sizes the children for: the one set, or for `-1` PHP's default.
    let per_child = ml.bytes.unwrap_or(128 << 20).max(1);
    let fits = budget / per_child;
    let message = match ml.bytes {
        Some(b) => format!(
            "{who} may run {count} workers × memory_limit {} = {}, past the {limit_text} limit less 64 MiB ({}): a worst case, but when it comes the kernel kills workers and users get 502s while the parent lives on",
            ml.text,
            human_bytes(b.saturating_mul(count)),
            human_bytes(budget)
        ),
        None => format!(
            "{who} may run {count} workers with memory_limit {}: no request is bounded, so {count} of them can take any memory, past the {limit_text} limit; when the kernel kills workers users get 502s while the parent lives on",
            ml.text
        ),
    };
    let mut evidence = vec![];
    let count_at = match count_setting {
        Some(s) => {
            let via = s
                .variable
                .as_ref()
                .map(|v| format!(" (from ${{{v}}}: {})", f.env.entry(v).unwrap_or_else(|| v.clone())))
                .unwrap_or_default();
            evidence.push(Evidence::naming(
                format!("{} = {count} at {}{via}", pool.directive, s.at()),
                [s.path.clone()],
            ));
            Some(s)
        }
        None => {
            evidence.push(Evidence::plain(format!(
                "{} is not set: Apache prefork's default is {count}",
                pool.directive
            )));
            None
        }
    };
    evidence.push(match &ml.setting {
        Some(s) => Evidence::naming(
            format!("memory_limit = {} at {} ({})", ml.text, s.at(), ml.how),
            [s.path.clone()],
        ),
        None => Evidence::plain(format!("memory_limit = {} ({})", ml.text, ml.how)),
    });
    if let Some(c) = &f.container {
        if let Some(l) = &c.limits_memory {
            evidence.push(super::k8s::limit_evidence(c, "memory", l));
        }
    }
    let requests = pool.max_requests.unwrap_or(MAX_REQUESTS);
    let children = fits.max(1);
    // When even one child's memory_limit passes the budget, the limit is lowered too.
    let lower_limit = (fits == 0).then(|| format!("{}M", budget >> 20));
    let fix = if fpm {
        let children_line = match count_at.and_then(|s| s.variable.as_deref()) {
            Some(var) => super::fixes::set_env(f, var, Some(&children.to_string())),
            None => format!("pm.max_children = {children}"),
        };
        let place = count_at
            .map(|s| format!("; in {} (the pool `{}`):", s.path, pool.name))
            .unwrap_or_else(|| format!("; in the pool `{}`:", pool.name));
        let mut pool_lines = Vec::new();
        if pool.max_requests.is_none() {
            pool_lines.push(format!("pm.max_requests = {requests}"));
        }
        match (&lower_limit, ml.unbounded) {
            (Some(l), _) => pool_lines.push(format!("php_admin_value[memory_limit] = {l}")),
            (None, true) => pool_lines.push("php_admin_value[memory_limit] = 128M".to_string()),
            _ => {}
        }
        let mut lines = Vec::new();
        if children_line.starts_with("pm.") {
            lines.push(place);
            lines.push(children_line);
            lines.extend(pool_lines);
        } else {
            // The count comes from the variable the pool reads: set it where it is set.
            lines.push(children_line);
            if !pool_lines.is_empty() {
                lines.push(place.replacen("; in", "; and in", 1));
                lines.extend(pool_lines);
            }
        }
        lines.push(format!(
            "; {children} × {} within {limit_text} less 64 MiB; or lower memory_limit and keep more children",
            lower_limit.as_deref().unwrap_or(if ml.unbounded { "128M" } else { ml.text.as_str() })
        ));
        lines.join("\n")
    } else {
        let place = count_at
            .map(|s| format!("# in {}:", s.path))
            .unwrap_or_else(|| "# in /etc/apache2/mods-available/mpm_prefork.conf:".to_string());
        let mut lines = vec![place, format!("MaxRequestWorkers {children}")];
        if pool.max_requests.is_none() {
            lines.push(format!("MaxConnectionsPerChild {requests}"));
        }
        match (&lower_limit, ml.unbounded) {
            (Some(l), _) => lines.push(format!("# and in php.ini: memory_limit = {l}")),
            (None, true) => lines.push("# and in php.ini: memory_limit = 128M".to_string()),
            _ => {}
        }
        lines.push(format!(
            "# {children} × {} within {limit_text} less 64 MiB",
            lower_limit.as_deref().unwrap_or(if ml.unbounded { "128M" } else { ml.text.as_str() })
        ));
        lines.join("\n")
    };
    RULE.finding(message).evidence_all(evidence).fix(fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    const LIMIT_2GI: &str = "    resources:\n      limits: {memory: 2Gi}\n";
    const POOL: &str = "/etc/php/8.2/fpm/pool.d/www.conf";

    fn fpm(pool: &str, env: &[&str]) -> TestImage {
        TestImage::new()
            .glibc()
            .program("/usr/sbin/php-fpm8.2")
            .file(
                "/etc/php/8.2/fpm/php-fpm.conf",
                "[global]\ninclude=/etc/php/8.2/fpm/pool.d/*.conf\n",
            )
            .file(POOL, pool)
            .file("/etc/php/8.2/fpm/php.ini", "[PHP]\nmemory_limit = 256M\n")
            .cmd(&["php-fpm8.2", "-F"])
            .env(env)
    }

    #[test]
    fn fires_when_children_times_the_limit_pass_the_container_limit() {
        let o = check(&fpm("[www]\npm = dynamic\npm.max_children = 50\n", &[]).facts_in(LIMIT_2GI));
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            f.message,
            "PHP-FPM pool `www` may run 50 workers × memory_limit 256M = 12800 MiB, past the 2Gi limit less 64 MiB (1984 MiB): a worst case, but when it comes the kernel kills workers and users get 502s while the parent lives on"
        );
        // (2048 - 64) / 256 = 7 children fit.
        assert!(f.fix.contains("pm.max_children = 7\npm.max_requests = 500\n"), "{}", f.fix);
        assert!(f.has_evidence(&format!("pm.max_children = 50 at {POOL} line 3")));
        assert!(f.has_evidence("memory_limit = 256M at /etc/php/8.2/fpm/php.ini line 2 (php.ini)"));
    }

    #[test]
    fn silent_when_they_fit_or_without_a_limit() {
        let o = check(&fpm("[www]\npm.max_children = 7\n", &[]).facts_in(LIMIT_2GI));
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        let o = check(&fpm("[www]\npm.max_children = 50\n", &[]).facts());
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().contains("--k8s"));
        // Not PHP at all.
        assert!(check(&TestImage::new().glibc().facts_in(LIMIT_2GI)).findings.is_empty());
    }

    #[test]
    fn a_count_from_a_variable_is_fixed_through_the_variable() {
        let t = fpm("[www]\npm.max_children = ${PHP_CHILDREN}\n", &["PHP_CHILDREN=40"]);
        let f = check(&t.facts_in(LIMIT_2GI)).sole_finding().clone();
        assert!(f.fix.contains("ENV PHP_CHILDREN=7"), "{}", f.fix);
        assert!(f.has_evidence(&format!(
            "pm.max_children = 40 at {POOL} line 2 (from ${{PHP_CHILDREN}}: PHP_CHILDREN=40)"
        )));
        let o = check(&fpm("[www]\npm.max_children = ${PHP_CHILDREN}\n", &["PHP_CHILDREN=7"]).facts_in(LIMIT_2GI));
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        // Set by a script to what memlint cannot work out: undecided.
        let t = fpm("[www]\npm.max_children = ${PHP_CHILDREN}\n", &[])
            .file("/entry.sh", "#!/bin/sh\nexport PHP_CHILDREN=$(nproc)\nexec \"$@\"\n")
            .entrypoint(&["/entry.sh"]);
        let o = check(&t.facts_in(LIMIT_2GI));
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().contains("PHP_CHILDREN"));
    }

    #[test]
    fn an_unbounded_memory_limit_warns() {
        let t = fpm("[www]\npm.max_children = 4\nphp_admin_value[memory_limit] = -1\n", &[]);
        let f = check(&t.facts_in(LIMIT_2GI)).sole_finding().clone();
        assert!(f.message.contains("memory_limit -1: no request is bounded"), "{}", f.message);
        assert!(f.fix.contains("php_admin_value[memory_limit] = 128M"), "{}", f.fix);
    }
}
