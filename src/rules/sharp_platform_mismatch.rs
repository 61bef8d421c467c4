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
