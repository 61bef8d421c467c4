//! .NET: runtimes, apps, NuGet packages (Npgsql), GSS encryption settings, Kerberos.

use super::loader::Loader;
use super::Env;
use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize)]
pub struct DotnetFacts {}

pub fn derive(_loader: &Loader, _env: &Env) -> DotnetFacts {
    DotnetFacts::default()
}
