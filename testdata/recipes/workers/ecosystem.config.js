// pm2's ecosystem file as its cluster-mode docs write it.
module.exports = {
  apps: [{
    name: "api",
    script: "server.js",
    instances: "max",
    exec_mode: "cluster"
  }]
}
