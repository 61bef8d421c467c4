use super::{Outcome, Rule};
use crate::facts::dotnet::gc::GcEnvVar;
use crate::facts::Facts;
use crate::units::bytes_spelled_out;
use crate::finding::{Anchor, Evidence, Finding, Severity};

/// Every variable name the rule reads, for the Dockerfile `ENV` line that sets one.
const VARIABLES: &[&str] = &[
    "DOTNET_GCHeapHardLimit",
    "COMPlus_GCHeapHardLimit",
    "DOTNET_GCHeapHardLimitPercent",
    "COMPlus_GCHeapHardLimitPercent",
    "DOTNET_GCHeapHardLimitSOH",
    "COMPlus_GCHeapHardLimitSOH",
    "DOTNET_GCHeapHardLimitLOH",
    "COMPlus_GCHeapHardLimitLOH",
    "DOTNET_GCHeapHardLimitPOH",
    "COMPlus_GCHeapHardLimitPOH",
    "DOTNET_GCHeapCount",
    "COMPlus_GCHeapCount",
    "DOTNET_GCHeapAffinitizeMask",
    "COMPlus_GCHeapAffinitizeMask",
    "DOTNET_GCgen0size",
    "COMPlus_GCgen0size",
];

pub(crate) const RULE: Rule = Rule {
    id: "dotnet-gc-env-decimal",
    severity: Severity::Warning,
    title: "A .NET GC environment variable is written in decimal but read as hexadecimal",
    doc: include_str!("../../rules/dotnet-gc-env-decimal.md"),
    tags: &["memory", "configuration", "dotnet"],
    check,
    anchor: Anchor::Env(VARIABLES),
};

fn check(f: &Facts) -> Outcome {
    let findings: Vec<Finding> = f
        .dotnet
        .gc
        .env
        .iter()
        .filter_map(|var| Some(finding(f, var, var.decimal_reading?, var.read_as?)))
        .collect();
    findings.into()
}

fn finding(f: &Facts, var: &GcEnvVar, decimal: u64, hex: u64) -> Finding {
    let (meant, read) = match var.setting.as_str() {
        "GCHeapHardLimitPercent" => (
            format!("{decimal} %"),
            if hex >= 100 {
                format!("{hex} %, which the runtime ignores (only 1 to 99 counts): no hard limit is configured, and in a container the default of 75 % of the memory limit applies")
            } else {
                format!("{hex} % of the memory limit")
            },
        ),
        "GCHeapCount" => (format!("{decimal} heaps"), format!("{hex} heaps")),
        "GCHeapAffinitizeMask" => (
            format!("the mask {decimal:#b}"),
            format!("the mask {hex:#b} ({} processors)", hex.count_ones()),
        ),
        _ => (bytes_spelled_out(decimal), bytes_spelled_out(hex)),
    };
    let message = format!(
        "{} is read as hexadecimal: 0x{} is {read}, not {meant}",
        var.entry(),
        var.value
    );
    let mut finding = RULE
        .finding(message)
        .evidence(Evidence::plain(format!(
            "{} from the {}: the runtime reads 0x{} = {hex}; as decimal it would be {decimal}",
            var.entry(),
            var.source,
            var.value
        )));
    if let Some(app) = f.dotnet.apps.first() {
        let path = app.runtimeconfig.as_deref().unwrap_or(&app.dir);
        finding = finding.evidence(Evidence::naming(
            format!(".NET app {} ({path})", app.name),
            [path],
        ));
    }
    let property = crate::facts::dotnet::gc::SETTINGS
        .iter()
        .find(|(s, _)| *s == var.setting)
        .and_then(|(_, p)| *p);
    let mut fix = format!(
        "{}\n# 0x{decimal:X} = {decimal}",
        super::fixes::set_env(f, &var.variable, Some(&format!("0x{decimal:X}")))
    );
    if let Some(p) = property {
        fix.push_str(&format!(
            "; or in the app's runtimeconfig.json, where values are decimal: \"{p}\": {decimal}"
        ));
    }
    finding.fix(fix)
}


#[cfg(test)]
mod tests {
    use super::*;

    use crate::facts::testing::TestImage;

    const RUNTIMECONFIG: &str = r#"{"runtimeOptions": {"tfm": "net8.0", "frameworks": [{"name": "Microsoft.NETCore.App", "version": "8.0.0"}, {"name": "Microsoft.AspNetCore.App", "version": "8.0.0"}]}}"#;

    /// An ASP.NET Core 8 app with these GC variables in its Env.
    fn api(env: &[&str]) -> Outcome {
        let f = TestImage::new()
            .glibc()
            .dotnet_runtime("8.0.11")
            .dotnet_app("/app", "Api", RUNTIMECONFIG, r#"{"libraries": {}}"#)
            .working_dir("/app")
            .entrypoint(&["dotnet", "Api.dll"])
            .env(env)
            .facts();
        check(&f)
    }

    #[test]
    fn fires_on_a_decimal_value() {
        let o = api(&["DOTNET_GCHeapHardLimit=100000000"]);
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            f.message,
            "DOTNET_GCHeapHardLimit=100000000 is read as hexadecimal: 0x100000000 is 4294967296 bytes (4 GiB), not 100000000 bytes (100 MB, 95.4 MiB)"
        );
        assert!(f.has_evidence(".NET app Api (/app/Api.runtimeconfig.json)"));
        assert_eq!(
            f.fix,
            "ENV DOTNET_GCHeapHardLimit=0x5F5E100\n# 0x5F5E100 = 100000000; or in the app's runtimeconfig.json, where values are decimal: \"System.GC.HeapHardLimit\": 100000000"
        );
        // A percentage of 75 reads as 0x75 = 117, which the runtime ignores.
        let o = api(&["COMPlus_GCHeapHardLimitPercent=75"]);
        assert_eq!(o.findings.len(), 1, "{o:?}");
        assert!(o.findings[0]
            .message
            .starts_with("COMPlus_GCHeapHardLimitPercent=75 is read as hexadecimal: 0x75 is 117 %, which the runtime ignores"));
    }

    #[test]
    fn silent_on_hexadecimal_or_single_digit_values() {
        for env in [
            "DOTNET_GCHeapHardLimit=0x5F5E100",
            "DOTNET_GCHeapHardLimit=5F5E100",
            "DOTNET_GCHeapCount=8",
            "DOTNET_gcServer=1",
        ] {
            let o = api(&[env]);
            assert!(o.findings.is_empty() && o.undecided.is_none(), "{env}: {o:?}");
        }
    }
}
