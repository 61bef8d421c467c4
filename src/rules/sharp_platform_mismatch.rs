use super::{Outcome, Rule};
use crate::arch::Arch;
use crate::facts::libc::LibcFamily;
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

/// npm's `cpu` name (Node's `process.arch`) for an OCI architecture; the OCI name itself where
/// memlint does not know the Node one.
fn npm_cpu(arch: &str) -> &str {
    Arch::from_oci(arch).and_then(Arch::node).unwrap_or(arch)
}

fn check(f: &Facts) -> Outcome {
    if f.sharp.installs.is_empty() {
        return Outcome::none();
    }
    let libc = match f.libc.family {
        LibcFamily::Glibc => "glibc",
        LibcFamily::Musl => "musl",
        _ => {
            return Outcome::undecided("the image's C library is unknown, so the sharp addon it needs is too")
        }
    };
    let arch = f
        .platform
        .binaries
        .clone()
        .unwrap_or_else(|| f.platform.declared.architecture.clone());
    let cpu = npm_cpu(&arch).to_string();
    let wanted = format!("linux{}-{cpu}", if libc == "musl" { "musl" } else { "" });
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
