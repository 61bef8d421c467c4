use super::{Outcome, Rule};
use crate::facts::os::Distro;
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};

pub(crate) const RULE: Rule = Rule {
    id: "npgsql-gssapi-missing",
    severity: Severity::Warning,
    title: "Npgsql 10 tries GSS encryption on every connection without Kerberos",
    doc: include_str!("../../rules/npgsql-gssapi-missing.md"),
    tags: &["memory", "dotnet", "npgsql", "postgresql"],
    check,
    // `ENV PGGSSENCMODE=disable` is the first fix.
    anchor: Anchor::Env(&["PGGSSENCMODE"]),
};

fn check(f: &Facts) -> Outcome {
    let affected = f.dotnet.npgsql_preferring_gss();
    if affected.is_empty() {
        if !f.dotnet.npgsql.is_empty() {
            return Outcome::undecided(
                "Npgsql is older than 10.0.0, whose GSS encryption default is Disable or absent",
            );
        }
        return Outcome::none();
    }
    if let Some(lib) = &f.dotnet.gssapi.resolved {
        return Outcome::undecided(format!("{} resolves to {lib}", f.dotnet.gssapi.searched_as));
    }
    if f.dotnet.gss.disabled {
        return Outcome::undecided(format!("GSS encryption is off: {}", f.dotnet.gss.reason));
    }
    let mut finding = RULE
        .finding(format!(
            "Npgsql {} will try GSS encryption on every new connection and fail: {} is not in the image",
            affected[0].version, f.dotnet.gssapi.searched_as
        ))
        .evidence_all(affected.iter().map(|p| {
            Evidence::naming(
                format!("{} {} in {}", p.name, p.version, p.deps_json),
                [&p.deps_json],
            )
        }))
        .evidence(Evidence::plain(format!(
            "{} does not resolve (ld.so.cache and system folders searched)",
            f.dotnet.gssapi.searched_as
        )))
        // The connection strings it and the lines below name are places in files
        // (`/app/appsettings.json#ConnectionStrings:Default`), not image paths.
        .evidence(Evidence::plain(f.dotnet.gss.reason.clone()));
    if let Some(v) = &f.dotnet.gss.pggssencmode {
        finding = finding.evidence(Evidence::plain(format!("PGGSSENCMODE={v}")));
    }
    for c in &f.dotnet.gss.connection_strings {
        finding = finding.evidence(Evidence::plain(format!(
            "connection string in {}: GSS Encryption Mode {}",
            c.source,
            c.gss_encryption_mode
                .as_deref()
                .filter(|m| !m.is_empty())
                .unwrap_or("not set")
        )));
    }
    let install = match f.os.distro {
        Distro::Debian => "RUN apt-get update && apt-get install -y --no-install-recommends libgssapi-krb5-2 && rm -rf /var/lib/apt/lists/*",
        Distro::Rhel => "RUN dnf install -y krb5-libs && dnf clean all",
        Distro::Alpine => "RUN apk add --no-cache krb5-libs",
        Distro::Unknown => "# install the package that ships libgssapi_krb5.so.2 (Debian libgssapi-krb5-2, RHEL/Alpine krb5-libs)",
    };
    Outcome::one(finding.fix(format!(
        "one of:\n\
         ENV PGGSSENCMODE=disable\n\
         #   switches GSS encryption off for the container; costs nothing unless you use Kerberos encryption\n\
         {install}\n\
         #   lets the GSS attempt succeed or fail cleanly; about 2 MB more in the image\n\
         # GSS Encryption Mode=Disable   (in every connection string; wins over PGGSSENCMODE)"
    )))
}
