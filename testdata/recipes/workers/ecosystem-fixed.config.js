// pm2's ecosystem file as its cluster-mode docs write it.
module.exports = {
  apps: [{
    name: "api",
    script: "server.js",
    instances: 2,
    exec_mode: "cluster"
  }]
}
