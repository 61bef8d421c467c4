use super::{Outcome, Rule};
use crate::facts::dotnet::gc::{AppGc, Setting};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Finding, Severity};

pub(crate) const RULE: Rule = Rule {
    id: "dotnet-server-gc-container",
    severity: Severity::Note,
    title: "An ASP.NET Core app runs Server GC without DATAS, a heap count or a hard limit",
    doc: include_str!("../../rules/dotnet-server-gc-container.md"),
    tags: &["memory", "gc", "dotnet", "containers"],
    check,
    anchor: Anchor::Env(&[
        "DOTNET_GCDynamicAdaptationMode",
        "COMPlus_GCDynamicAdaptationMode",
        "DOTNET_gcServer",
        "COMPlus_gcServer",
        "DOTNET_GCHeapCount",
        "COMPlus_GCHeapCount",
        "DOTNET_GCHeapHardLimit",
        "COMPlus_GCHeapHardLimit",
    ]),
};

/// The GC settings that decide this rule, as their environment variables spell them after
/// the `DOTNET_`/`COMPlus_` prefix.
const GC_BOUNDS: &[&str] = &[
    "gcServer",
    "GCDynamicAdaptationMode",
    "GCHeapCount",
    "GCHeapAffinitizeMask",
    "GCHeapHardLimit",
    "GCHeapHardLimitPercent",
    "GCHeapHardLimitSOH",
    "GCHeapHardLimitLOH",
    "GCHeapHardLimitPOH",
];

fn check(f: &Facts) -> Outcome {
    let apps: Vec<&AppGc> = f.dotnet.gc.apps.iter().filter(|a| a.aspnetcore).collect();
    if apps.is_empty() {
        return Outcome::none();
    }
    // A heap count, hard limit or DATAS setting may be in a variable a script sets in a way
    // memlint cannot work out.
    let undecided = GC_BOUNDS.iter().find_map(|setting| f.dotnet.gc.undecided(setting));
    if let Some(why) = undecided {
        return Outcome::undecided(why.to_string());
    }
    let findings: Vec<Finding> = apps
        .into_iter()
        .filter(|a| a.server.value != 0 && a.dynamic_adaptation.value == 0 && a.bounded().is_none())
        .map(finding)
        .collect();
    findings.into()
}

fn evidence(what: &str, s: &Setting) -> Evidence {
    let state = if s.value == 0 { "off" } else { "on" };
    let text = format!("{what} {state}, from {}", s.source);
    match &s.path {
        Some(p) => Evidence::naming(text, [p]),
        None => Evidence::plain(text),
    }
}

fn finding(app: &AppGc) -> Finding {
    let version = app
        .runtime_major
        .map(|m| format!(" (.NET {m})"))
        .unwrap_or_default();
    let datas = match app.runtime_major {
        Some(m) if m >= 9 => "DATAS turned off",
        Some(8) => "DATAS off (the .NET 8 default)",
        _ => "no DATAS (it came with .NET 8)",
    };
    let message = format!(
        "ASP.NET Core app {}{version} runs Server GC with {datas} and no heap count or hard limit: one heap per visible core, sized from the node rather than the container",
        app.app
    );
    let fix = match app.runtime_major {
        Some(m) if m >= 8 => "ENV DOTNET_GCDynamicAdaptationMode=1\n# DATAS: heaps grow from one with the load and shrink again; or cap the heaps:\n# ENV DOTNET_GCHeapCount=0x2\n# or run Workstation GC: ENV DOTNET_gcServer=0",
        _ => "ENV DOTNET_GCHeapCount=0x2\n# a fixed number of heaps (hexadecimal in the environment); or run Workstation GC:\n# ENV DOTNET_gcServer=0",
    };
    RULE.finding(message)
        .evidence(Evidence::naming(
            format!("ASP.NET Core app {} ({})", app.app, app.runtimeconfig),
            [&app.runtimeconfig],
        ))
        .evidence(evidence("Server GC", &app.server))
        .evidence(evidence("DATAS (GCDynamicAdaptationMode)", &app.dynamic_adaptation))
        .evidence(Evidence::plain(
            "no GCHeapCount, GCHeapAffinitizeMask, GCHeapHardLimit or GCHeapHardLimitPercent in the environment or runtimeconfig.json",
        ))
        .fix(fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    /// The runtimeconfig.json `dotnet publish` writes for an ASP.NET Core app on `major`
    /// (the Web SDK turns Server GC on).
    fn runtimeconfig(major: u32, server: bool) -> String {
        format!(
            r#"{{"runtimeOptions": {{"tfm": "net{major}.0", "frameworks": [{{"name": "Microsoft.NETCore.App", "version": "{major}.0.0"}}, {{"name": "Microsoft.AspNetCore.App", "version": "{major}.0.0"}}], "configProperties": {{"System.GC.Server": {server}}}}}}}"#
        )
    }

    const DEPS: &str = r#"{"libraries": {"Api/1.0.0": {"type": "project", "serviceable": false}}}"#;

    fn api(major: u32, server: bool) -> TestImage {
        TestImage::new()
            .glibc()
            .dotnet_runtime(&format!("{major}.0.11"))
            .dotnet_app("/app", "Api", &runtimeconfig(major, server), DEPS)
            .working_dir("/app")
            .entrypoint(&["dotnet", "Api.dll"])
    }

    #[test]
    fn fires_for_server_gc_on_dotnet_8_without_datas_or_bounds() {
        let o = check(&api(8, true).facts());
        let finding = o.sole_finding();
        assert_eq!(finding.severity, Severity::Note);
        assert_eq!(
            finding.message,
            "ASP.NET Core app Api (.NET 8) runs Server GC with DATAS off (the .NET 8 default) and no heap count or hard limit: one heap per visible core, sized from the node rather than the container"
        );
        assert!(
            finding.has_evidence("Server GC on, from /app/Api.runtimeconfig.json System.GC.Server"),
            "{:?}",
            finding.evidence
        );
        assert!(finding.fix.starts_with("ENV DOTNET_GCDynamicAdaptationMode=1\n"));
        // .NET 9 and later turn DATAS on by default: off means someone turned it off.
        let o = check(&api(9, true).env(&["DOTNET_GCDynamicAdaptationMode=0"]).facts());
        assert_eq!(o.findings.len(), 1, "{o:?}");
        assert!(o.findings[0].message.contains("(.NET 9) runs Server GC with DATAS turned off"));
    }

    #[test]
    fn silent_with_datas_a_bound_or_workstation_gc() {
        for fixed in [
            api(8, true).env(&["DOTNET_GCDynamicAdaptationMode=1"]),
            api(8, true).env(&["DOTNET_GCHeapCount=0x2"]),
            api(8, true).env(&["DOTNET_GCHeapHardLimit=0x20000000"]),
            api(8, true).env(&["DOTNET_gcServer=0"]),
            api(8, false),
            // DATAS is the .NET 9 default.
            api(9, true),
        ] {
            let o = check(&fixed.facts());
            assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        }
    }

    #[test]
    fn undecided_when_a_bound_is_set_at_run_time() {
        // The manifest takes the heap limit from a ConfigMap memlint does not see.
        let f = api(8, true).facts_in(
            "    env:\n    - name: DOTNET_GCHeapHardLimit\n      valueFrom: {configMapKeyRef: {name: gc, key: limit}}\n",
        );
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().contains("DOTNET_GCHeapHardLimit"));
        // A known DOTNET_ value wins over an undecided COMPlus_ one.
        let f = api(8, true).env(&["DOTNET_GCHeapCount=0x2"]).facts_in(
            "    env:\n    - name: COMPlus_GCHeapCount\n      valueFrom: {configMapKeyRef: {name: gc, key: heaps}}\n",
        );
        let o = check(&f);
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
    }
}
