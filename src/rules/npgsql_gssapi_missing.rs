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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::{library, TestImage, LIB};

    const RUNTIMECONFIG: &str = r#"{"runtimeOptions": {"tfm": "net10.0", "frameworks": [{"name": "Microsoft.NETCore.App", "version": "10.0.0"}, {"name": "Microsoft.AspNetCore.App", "version": "10.0.0"}], "configProperties": {"System.GC.Server": true}}}"#;
    const APPSETTINGS: &str = r#"{"ConnectionStrings": {"Default": "Host=db;Database=app;Username=app;Password=secret"}}"#;

    /// An ASP.NET Core 10 app on mcr.microsoft.com/dotnet/aspnet:10.0 (which lacks
    /// libgssapi_krb5.so.2) that uses Npgsql `npgsql`.
    fn api(npgsql: &str) -> TestImage {
        api_with(npgsql, APPSETTINGS)
    }

    /// [`api`] with this appsettings.json.
    fn api_with(npgsql: &str, appsettings: &str) -> TestImage {
        let deps = format!(
            r#"{{"libraries": {{"Api/1.0.0": {{"type": "project"}}, "Npgsql/{npgsql}": {{"type": "package", "serviceable": true}}}}}}"#
        );
        TestImage::new()
            .glibc()
            .dotnet_runtime("10.0.1")
            .dotnet_app("/app", "Api", RUNTIMECONFIG, &deps)
            .file("/app/appsettings.json", appsettings)
            .working_dir("/app")
            .entrypoint(&["dotnet", "Api.dll"])
    }

    #[test]
    fn fires_for_npgsql_10_without_kerberos() {
        let o = check(&api("10.0.0").facts());
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            f.message,
            "Npgsql 10.0.0 will try GSS encryption on every new connection and fail: libgssapi_krb5.so.2 is not in the image"
        );
        assert!(f.has_evidence("Npgsql 10.0.0 in /app/Api.deps.json"));
        assert!(f.has_evidence("connection string in /app/appsettings.json#ConnectionStrings:Default: GSS Encryption Mode not set"));
        assert!(f.fix.contains("ENV PGGSSENCMODE=disable"));
        assert!(f.fix.contains("apt-get install -y --no-install-recommends libgssapi-krb5-2"));
    }

    #[test]
    fn silent_without_npgsql() {
        let f = TestImage::new()
            .glibc()
            .dotnet_runtime("10.0.1")
            .dotnet_app("/app", "Api", RUNTIMECONFIG, r#"{"libraries": {"Api/1.0.0": {"type": "project"}}}"#)
            .working_dir("/app")
            .entrypoint(&["dotnet", "Api.dll"])
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
    }

    /// Each fix leaves the rule silent, and `-v` says which one it saw.
    #[test]
    fn undecided_once_fixed_or_on_older_npgsql() {
        let cases = [
            (api("10.0.0").env(&["PGGSSENCMODE=disable"]), "GSS encryption is off: "),
            (
                api("10.0.0").elf(&format!("{LIB}/libgssapi_krb5.so.2"), library(&["libc.so.6"])),
                "libgssapi_krb5.so.2 resolves to /usr/lib/x86_64-linux-gnu/libgssapi_krb5.so.2",
            ),
            (
                api_with(
                    "10.0.0",
                    r#"{"ConnectionStrings": {"Default": "Host=db;Database=app;GSS Encryption Mode=Disable"}}"#,
                ),
                "GSS encryption is off: ",
            ),
            (api("8.0.5"), "Npgsql is older than 10.0.0"),
        ];
        for (image, why) in cases {
            let o = check(&image.facts());
            assert!(o.findings.is_empty(), "{o:?}");
            let undecided = o.undecided.unwrap_or_default();
            assert!(undecided.starts_with(why), "{undecided}");
        }
    }
}
