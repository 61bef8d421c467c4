use super::{Outcome, Rule};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};

pub(crate) const RULE: Rule = Rule {
    id: "sharp-platform-mismatch",
    severity: Severity::Error,
    title: "No installed sharp native addon fits the image",
    doc: include_str!("../../rules/sharp-platform-mismatch.md"),
    tags: &["correctness", "sharp", "nodejs"],
    check,
    // The instruction that installed the node modules.
    anchor: Anchor::Installs(&["npm ", "yarn ", "pnpm ", "node_modules"]),
};

fn check(f: &Facts) -> Outcome {
    if f.sharp.installs.is_empty() {
        return Outcome::none();
    }
    let Some(target) = f.sharp.wanted else {
        return Outcome::undecided(
            "the image's C library or architecture is unknown, so the sharp addon it needs is too",
        );
    };
    let (arch, libc, cpu) = (target.arch.oci(), target.npm_libc(), target.npm_cpu());
    let wanted = target.platform();
    f.sharp
        .installs
        .iter()
        .filter(|s| !s.usable)
        .map(|s| {
            let message = if s.addons.is_empty() {
                format!("sharp at {} has no native addon installed: it cannot load", s.path)
            } else {
                format!("no sharp addon at {} fits linux/{arch} on {libc}: sharp cannot load", s.path)
            };
            let mut finding = RULE
                .finding(message)
                .evidence(Evidence::naming(
                    format!("sharp {} at {}", s.version.as_deref().unwrap_or("(version unknown)"), s.path),
                    [&s.path],
                ))
                .evidence(Evidence::plain(format!("the image needs the {wanted} addon")));
            for a in &s.addons {
                // An addon is named by its package, else by its .node file.
                let (what, path) = match (&a.package, &a.path) {
                    (Some(package), _) => (package.clone(), None),
                    (None, Some(path)) => (path.clone(), Some(path)),
                    (None, None) => (a.platform.clone(), None),
                };
                let text = match &a.mismatch_reason {
                    Some(r) => format!("{what}: {r}"),
                    None => format!("{what} ({})", a.platform),
                };
                finding = finding.evidence(Evidence::naming(text, path));
            }
            finding.fix(format!(
                "install the dependencies inside the image build, for its platform:\nRUN npm ci --omit=dev\n# or add the addon for this platform explicitly:\n# RUN npm install --os=linux --cpu={cpu} --libc={libc} sharp"
            ))
        })
        .collect::<Vec<_>>()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    /// node:20-bookworm-slim running `node server.js` from /app.
    fn node() -> TestImage {
        TestImage::new()
            .glibc()
            .node("20.11.1")
            .working_dir("/app")
            .cmd(&["node", "server.js"])
    }

    #[test]
    fn fires_when_only_another_platforms_addon_is_installed() {
        // node_modules installed on Alpine (or a Mac) and copied into a Debian image.
        let o = check(&node().sharp("/app", "0.34.1", "linuxmusl-x64").facts());
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Error);
        assert_eq!(
            f.message,
            "no sharp addon at /app/node_modules/sharp fits linux/amd64 on glibc: sharp cannot load"
        );
        assert!(f.has_evidence("the image needs the linux-x64 addon"));
        assert!(f.fix.contains("npm install --os=linux --cpu=x64 --libc=glibc sharp"), "{}", f.fix);
        // sharp with no addon at all.
        let o = check(&node().npm_package("/app", "sharp", "0.34.1").facts());
        assert_eq!(o.findings.len(), 1, "{o:?}");
        assert_eq!(
            o.findings[0].message,
            "sharp at /app/node_modules/sharp has no native addon installed: it cannot load"
        );
    }

    #[test]
    fn silent_when_an_addon_fits() {
        let o = check(&node().sharp("/app", "0.34.1", "linux-x64").facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        let o = check(&node().facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
    }

    #[test]
    fn undecided_when_the_c_library_is_unknown() {
        // The app's files alone (an app layer, say): no C library to tell the addon it needs.
        let f = TestImage::new()
            .sharp("/app", "0.34.1", "linux-x64")
            .working_dir("/app")
            .cmd(&["node", "server.js"])
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().starts_with("the image's C library or architecture is unknown"));
    }
}
