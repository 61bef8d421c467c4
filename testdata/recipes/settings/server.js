const http = require('http');
const cache = new Map();
http.createServer((req, res) => {
  cache.set(req.url, Buffer.alloc(1024 * 1024));
  res.end(`${process.version} ${cache.size}\n`);
}).listen(3000);
