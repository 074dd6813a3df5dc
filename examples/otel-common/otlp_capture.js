#!/usr/bin/env node
// otlp_capture.js — records what an OTLP/HTTP exporter POSTs, for tests/fixtures/otel/.
//   node otlp_capture.js OUTFILE   prints "PORT <n>"; every POST /v1/traces body is appended
// to OUTFILE as one line, byte for byte as the exporter sent it (OTLP JSON has no raw
// newlines; a protobuf body is written as {"contentType":..., "base64":...}). Loopback only.
'use strict';
const http = require('http');
const fs = require('fs');
const out = process.argv[2];
if (!out) { process.stderr.write('usage: node otlp_capture.js OUTFILE\n'); process.exit(2); }
fs.writeFileSync(out, '');
const server = http.createServer((rq, res) => {
  const chunks = [];
  rq.on('data', (c) => chunks.push(c));
  rq.on('end', () => {
    const raw = Buffer.concat(chunks);
    const type = rq.headers['content-type'] || '';
    const line = type.includes('json') ? raw.toString('utf8').replace(/\n/g, ' ')
      : JSON.stringify({ contentType: type, base64: raw.toString('base64') });
    fs.appendFileSync(out, `${line}\n`);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`PORT ${server.address().port}\n`));
