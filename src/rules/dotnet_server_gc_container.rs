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
