// harness.js — the agents-protocol loop shared by the examples/otel-* systems: one JSON request
// per stdin line ({"turns":[...], "traceparent":"00-..."}), the framework's spans exported over
// OTLP/HTTP JSON (OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, default 127.0.0.1:4318) under the
// request's traceparent, then {"event":"done"} on stdout once the batch is flushed. The
// frameworks' own instrumentation makes the spans; this file only sets up the SDK.
// The OpenTelemetry packages are resolved from the calling example's node_modules.
'use strict';
const readline = require('readline');

function setup(requireFrom, serviceName) {
  const api = requireFrom('@opentelemetry/api');
  const { NodeTracerProvider } = requireFrom('@opentelemetry/sdk-trace-node');
  const { BatchSpanProcessor } = requireFrom('@opentelemetry/sdk-trace-base');
  const { OTLPTraceExporter } = requireFrom('@opentelemetry/exporter-trace-otlp-http');
  const { resourceFromAttributes } = requireFrom('@opentelemetry/resources');
  const env = process.env;
  const config = { timeoutMillis: 2000 };
  if (!env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT && !env.OTEL_EXPORTER_OTLP_ENDPOINT) {
    config.url = 'http://127.0.0.1:4318/v1/traces';
  }
  const exporter = new OTLPTraceExporter(config);
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': serviceName }),
    spanProcessors: [new BatchSpanProcessor(exporter,
      { maxExportBatchSize: 4096, maxQueueSize: 16384, scheduledDelayMillis: 60000 })],
  });
  provider.register();
  return { api, provider, exporter };
}

function parentContext(api, req) {
  if (typeof req.traceparent !== 'string') return api.ROOT_CONTEXT;
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(req.traceparent);
  if (!m) return api.ROOT_CONTEXT;
  return api.trace.setSpanContext(api.ROOT_CONTEXT,
    { traceId: m[1], spanId: m[2], traceFlags: parseInt(m[3], 16), isRemote: true });
}

// runCase(turns) -> Promise<string answer>; it runs inside the request's trace context.
// provider: anything with forceFlush() and shutdown() (an SDK whose own setup owns the real
// provider, like Traceloop's, passes its flush functions).
async function serve({ api, provider }, runCase, { stdoutEvents } = {}) {
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (line.trim() === '') continue;
    let req = null;
    try { req = JSON.parse(line); } catch (e) { req = null; }
    const ok = req && Array.isArray(req.turns) && req.turns.length > 0 &&
      req.turns.every((t) => typeof t === 'string');
    if (!ok) {
      process.stdout.write(`${JSON.stringify({ event: 'output', content: 'error: malformed request' })}\n`);
    } else {
      let answer;
      try {
        answer = await api.context.with(parentContext(api, req), () => runCase(req.turns));
      } catch (err) {
        answer = `error: ${(err && err.message) || err}`;
      }
      if (stdoutEvents) process.stdout.write(`${JSON.stringify({ event: 'output', content: answer })}\n`);
    }
    try { await provider.forceFlush(); } catch (err) {
      process.stderr.write(`exporting spans failed: ${(err && err.message) || err}\n`);
    }
    process.stdout.write('{"event":"done"}\n');
  }
  await provider.shutdown().catch(() => {});
}

module.exports = { setup, serve, parentContext };
