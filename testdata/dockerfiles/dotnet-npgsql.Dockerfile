# memlint ignore=npgsql-gssapi-missing reason="PGGSSENCMODE=disable is set by the deployment"
FROM mcr.microsoft.com/dotnet/aspnet:10.0
WORKDIR /app
COPY out/ .
ENTRYPOINT ["dotnet", "WebApi.dll"]
