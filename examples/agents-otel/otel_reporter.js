// otel_reporter.js — the --events otel reporter of system.js: the agents' behaviour as
// OpenTelemetry spans with the gen_ai semantic conventions, nothing but {"event":"done"} on
// stdout. Only the public SDK is used (no flare-specific exporter), as a real system would.
//
// Per request (one trace, whose parent is the request's traceparent):
//
//   invoke_workflow taskforce             gen_ai.operation.name=invoke_workflow,
//   │                                     gen_ai.input.messages (the turns),
//   │                                     gen_ai.output.messages (the final answer)
//   ├─ invoke_agent Master                gen_ai.agent.name=Master, gen_ai.input.messages
//   ├─ invoke_agent Worker                (what the previous agent handed over)
//   │  └─ execute_tool calculate          gen_ai.tool.name, gen_ai.tool.call.arguments,
//   │                                     gen_ai.tool.call.result; status ERROR on failure
//   ├─ invoke_agent Checker
//   ├─ invoke_agent Master                gen_ai.usage.input_tokens / output_tokens
//   ├─ handoff user -> Master             from_agent=user, to_agent=Master (a second turn)
//   └─ invoke_agent Master ...
//
// Each activation of an agent is one invoke_agent span; they are siblings under the workflow
// span in the order the agents ran, so the handoffs are the order of sibling agents
// (Master -> Worker -> Checker -> Master). Where that order cannot say who handed over — the
// user speaking again, after the Master answered the previous turn — a handoff span with
// from_agent / to_agent (as the OpenAI Agents SDK writes them) says it explicitly.
'use strict';

const api = require('@opentelemetry/api');
const { W3CTraceContextPropagator } = require('@opentelemetry/core');
const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
const { BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http');
const { resourceFromAttributes } = require('@opentelemetry/resources');

const { SpanStatusCode, SpanKind } = api;

// gen_ai semantic-convention attribute names (Semantic Conventions 1.37+, "Development").
const A = {
  op: 'gen_ai.operation.name',
  agentName: 'gen_ai.agent.name',
  toolName: 'gen_ai.tool.name',
  toolType: 'gen_ai.tool.type',
  toolArgs: 'gen_ai.tool.call.arguments',
  toolResult: 'gen_ai.tool.call.result',
  input: 'gen_ai.input.messages',
  output: 'gen_ai.output.messages',
  inTokens: 'gen_ai.usage.input_tokens',
  outTokens: 'gen_ai.usage.output_tokens',
  errorType: 'error.type',
};

// Span times. The SDK's default start time has only millisecond resolution here, so the spans
// of one request would mostly share a start time and a consumer could not order siblings by
// it. Every start and end time is taken from one monotonic nanosecond clock instead, strictly
// increasing, so the order of the spans is the order in which the agents acted.
const BASE_NS = BigInt(Date.now()) * 1000000n - process.hrtime.bigint();
let lastNs = 0n;
function now() {
  let ns = BASE_NS + process.hrtime.bigint();
  if (ns <= lastNs) ns = lastNs + 1n;
  lastNs = ns;
  return [Number(ns / 1000000000n), Number(ns % 1000000000n)];
}

const textMessages = (role, text) =>
  JSON.stringify([{ role, parts: [{ type: 'text', content: text }] }]);

class OtelReporter {
  constructor(out) {
    this.out = out;
    // The exporter reads OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT
    // itself (appending /v1/traces to the latter). Without either, say 127.0.0.1 rather than
    // the SDK's default "localhost", which may resolve to ::1 first.
    const env = process.env;
    const config = {};
    if (!env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT && !env.OTEL_EXPORTER_OTLP_ENDPOINT) {
      config.url = 'http://127.0.0.1:4318/v1/traces';
    }
    // A receiver on loopback answers in milliseconds; give up on a batch after 2 s (instead of
    // the SDK's 10 s) unless OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT says otherwise, so that a
    // missing receiver costs a case 2 s, not flare's whole per-case timeout.
    if (!env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT && !env.OTEL_EXPORTER_OTLP_TIMEOUT) {
      config.timeoutMillis = 2000;
    }
    this.provider = new NodeTracerProvider({
      resource: resourceFromAttributes({ 'service.name': 'taskforce-otel' }),
      // One batch per request: forceFlush() in finish() sends it before "done".
      spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter(config),
        { maxExportBatchSize: 2048, maxQueueSize: 8192, scheduledDelayMillis: 60000 })],
    });
    this.tracer = this.provider.getTracer('taskforce-otel', '1.0.0');
    this.propagator = new W3CTraceContextPropagator();
    this.root = null;
    this.agent = null; // the active invoke_agent span
    this.agentName = null;
  }

  async run(req, body) {
    // The request's traceparent becomes the parent, so these spans join flare's case trace.
    const carrier = typeof req.traceparent === 'string' ? { traceparent: req.traceparent } : {};
    const parent = this.propagator.extract(api.ROOT_CONTEXT, carrier, api.defaultTextMapGetter);
    this.root = this.tracer.startSpan('invoke_workflow taskforce', {
      kind: SpanKind.INTERNAL, startTime: now(),
      attributes: { [A.op]: 'invoke_workflow', 'gen_ai.workflow.name': 'taskforce' },
    }, parent);
    if (Array.isArray(req.turns)) {
      this.root.setAttribute(A.input, JSON.stringify(req.turns.map((t) =>
        ({ role: 'user', parts: [{ type: 'text', content: String(t) }] }))));
    }
    this.rootCtx = api.trace.setSpan(parent, this.root);
    this.lastOutput = null;
    this.prevName = 'user'; // a consumer's view of who held control before the first agent
    try {
      await body();
    } finally {
      this.endAgent();
      if (this.lastOutput !== null) this.root.setAttribute(A.output, textMessages('assistant', this.lastOutput));
      this.root.end(now());
      this.root = null;
    }
  }

  endAgent() {
    if (this.agent) this.agent.end(now());
    this.agent = null;
    this.agentName = null;
  }

  // A handoff: the previous agent's span ends, the receiving agent's begins.
  activate(from, to, content) {
    const prev = this.prevName;
    this.endAgent();
    if (from !== prev || from === to) {
      // Not implied by the order of sibling agents: say it with a handoff span.
      const h = this.tracer.startSpan(`handoff ${from} -> ${to}`, {
        kind: SpanKind.INTERNAL, startTime: now(),
        attributes: { from_agent: from, to_agent: to },
      }, this.rootCtx);
      h.end(now());
    }
    this.agent = this.tracer.startSpan(`invoke_agent ${to}`, {
      kind: SpanKind.INTERNAL, startTime: now(),
      attributes: {
        [A.op]: 'invoke_agent', [A.agentName]: to,
        [A.input]: textMessages(from === 'user' ? 'user' : 'assistant', content),
      },
    }, this.rootCtx);
    this.agentName = to;
    this.prevName = to;
  }

  tool(agent, name, args, res) {
    const ctx = api.trace.setSpan(this.rootCtx, this.agent || this.root);
    const span = this.tracer.startSpan(`execute_tool ${name}`, {
      kind: SpanKind.INTERNAL, startTime: now(),
      attributes: {
        [A.op]: 'execute_tool', [A.toolName]: name, [A.toolType]: 'function',
        [A.agentName]: agent, [A.toolArgs]: JSON.stringify(args),
        [A.toolResult]: res.content,
      },
    }, ctx);
    if (!res.ok) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: res.content });
      span.setAttribute(A.errorType, res.content);
    }
    span.end(now());
  }

  usage(agent, inTokens, outTokens) {
    const span = this.agent || this.root;
    span.setAttribute(A.inTokens, inTokens);
    span.setAttribute(A.outTokens, outTokens);
  }

  output(content) {
    // The turn's answer: on the Master's span that produced it, and (the last one) on the root.
    if (this.agent) this.agent.setAttribute(A.output, textMessages('assistant', content));
    this.lastOutput = content;
  }

  async finish() {
    // Export this request's spans before saying "done", so they reach the receiver while
    // flare still attributes them to the case.
    try {
      await this.provider.forceFlush();
    } catch (err) {
      // Lost spans are the receiver's problem to report; the system itself carries on.
      process.stderr.write(`system.js: exporting spans failed: ${(err && err.message) || err}\n`);
    }
    this.out.write('{"event":"done"}\n');
  }

  async shutdown() {
    try {
      await this.provider.shutdown();
    } catch (err) {
      process.stderr.write(`system.js: exporting spans failed: ${(err && err.message) || err}\n`);
    }
  }
}

module.exports = { OtelReporter };
