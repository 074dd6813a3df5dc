#!/usr/bin/env node
// The task force of ../otel-common/domain.js instrumented with OpenLLMetry (Traceloop's node
// SDK): a hand-written tool-calling loop over the openai client, the supervisor and each worker
// wrapped in traceloop.withAgent, each tool in withTool, each user turn in withWorkflow; the SDK's
// OpenAI instrumentation records the chat completions. The supervisor's tools route_to_<worker>
// run the worker's loop. Spans go to OTEL_EXPORTER_OTLP_ENDPOINT through the OTLP/HTTP JSON
// exporter handed to traceloop.initialize. Model: OPENAI_BASE_URL (the stub).
//   node system.js [--events otel|stdout]   stdout: also print each answer as an output event.
'use strict';
const api = require('@opentelemetry/api');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http');
const traceloop = require('@traceloop/node-server-sdk');
const { OpenAI } = require('openai'); // the class: Traceloop patches OpenAI.Chat.Completions
const harness = require('../otel-common/harness');
const D = require('../otel-common/domain');

const env = process.env;
const url = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ||
  `${env.OTEL_EXPORTER_OTLP_ENDPOINT || 'http://127.0.0.1:4318'}/v1/traces`;
traceloop.initialize({ appName: 'otel-openllmetry', disableBatch: false, silenceInitializationMessage: true,
  exporter: new OTLPTraceExporter({ url, timeoutMillis: 2000 }), instrumentModules: { openAI: OpenAI },
  traceContent: true, traceloopSyncEnabled: false, baseUrl: 'http://127.0.0.1:9' }); // no prompt-registry fetch from api.traceloop.com
const client = new OpenAI({ apiKey: 'stub', baseURL: env.OPENAI_BASE_URL || 'http://127.0.0.1:8000/v1' });

const schema = (param) => ({ type: 'object', properties: { [param]: { type: 'string' } }, required: [param] });
const fn = (name, description, param) => ({ type: 'function', function: { name, description, parameters: schema(param) } });

// One agent: ask the model, run the tools it calls, until it answers in text (at most 4 steps).
async function runAgent(name, prompt, tools, text) {
  return traceloop.withAgent({ name }, async (input) => {
    const messages = [{ role: 'system', content: prompt }, { role: 'user', content: input }];
    for (let step = 0; step < 4; step++) {
      const r = await client.chat.completions.create({ model: 'stub-model', messages,
        tools: tools.length ? tools.map((t) => t.spec) : undefined });
      const m = r.choices[0].message;
      messages.push(m);
      if (!m.tool_calls || m.tool_calls.length === 0) return m.content || '';
      for (const c of m.tool_calls) {
        const t = tools.find((x) => x.spec.function.name === c.function.name);
        // A tool that throws is reported to the model as its result. OpenLLMetry 0.27's withTool
        // never ends the span of a function that throws (withEntity has no rejection path: the
        // span is lost), so the failure is recorded on its span with the OpenTelemetry API, as
        // an OpenLLMetry user has to.
        const out = await traceloop.withTool({ name: c.function.name }, async (a) => {
          try {
            return t ? await t.run(a) : `unknown tool ${c.function.name}`;
          } catch (err) {
            const span = api.trace.getActiveSpan();
            span.recordException(err);
            span.setStatus({ code: api.SpanStatusCode.ERROR, message: String(err.message || err) });
            return `error: ${err.message || err}`;
          }
        }, JSON.parse(c.function.arguments));
        messages.push({ role: 'tool', tool_call_id: c.id, content: String(out) });
      }
    }
    return '';
  }, text);
}

const workerTools = (w) => D.WORKERS[w].tools.map((t) => ({
  spec: fn(t, D.TOOLS[t].description, D.TOOLS[t].param), run: async (a) => D.TOOLS[t].run(a) }));
const routes = Object.keys(D.WORKERS).map((w) => ({ spec: fn(`route_to_${w}`, `Hand the task to the ${w}`, 'task'),
  run: (a) => runAgent(w, D.WORKERS[w].prompt, workerTools(w), a.task) }));

async function turn(text) {
  let answer = '';
  for (let round = 0; round < D.loopRounds(text); round++) {
    answer = await runAgent('supervisor', D.SUPERVISOR_PROMPT, routes, text);
  }
  return answer;
}

// one workflow per user turn, so that each turn's answer is its workflow's output
harness.serve({ api, provider: { forceFlush: () => traceloop.forceFlush(), shutdown: () => traceloop.forceFlush() } },
  async (turns) => {
    const answers = [];
    for (const t of turns.slice(-6)) answers.push(await traceloop.withWorkflow({ name: 'taskforce' }, turn, t));
    return answers.join('\n');
  }, { stdoutEvents: process.argv.includes('stdout') }).catch((err) => {
  process.stderr.write(`system.js: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
