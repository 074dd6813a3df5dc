#!/usr/bin/env node
// The task force of ../otel-common/domain.js on the OpenAI Agents SDK: the supervisor is an
// Agent whose tools are the workers (route_to_<worker>, agents as tools), each worker an Agent
// with its function tools; the undeclared translator is a handoff. Spans come only from OpenInference's OpenAI Agents instrumentation (a
// TracingProcessor bridging the SDK's traces to OpenTelemetry). Model: Chat Completions at
// OPENAI_BASE_URL (the stub). Pinned to @openai/agents 0.3.0 / openai 6, which run on Node 20
// (openai 7, which later @openai/agents need, wants Node >= 22).
//   node system.js [--events otel|stdout]   stdout: also print each answer as an output event.
'use strict';
const harness = require('../otel-common/harness');
const otel = harness.setup(require, 'otel-openai-agents');
const agents = require('@openai/agents');
const { OpenAIAgentsInstrumentation } = require('@arizeai/openinference-instrumentation-openai-agents');
new OpenAIAgentsInstrumentation({ tracerProvider: otel.provider }).manuallyInstrument(agents);
const { default: OpenAI } = require('openai');
const { z } = require('zod');
const D = require('../otel-common/domain');

agents.setDefaultOpenAIClient(new OpenAI({ apiKey: 'stub',
  baseURL: process.env.OPENAI_BASE_URL || 'http://127.0.0.1:8000/v1' }));
agents.setOpenAIAPI('chat_completions');

// The workers are the supervisor's tools (the SDK's agents-as-tools, Agent.asTool: the
// supervisor keeps the conversation and answers); the undeclared translator is a handoff
// (transfer_to_translator: it takes the conversation over and answers itself).
const agentOf = (name, w) => new agents.Agent({
  name, instructions: w.prompt, model: 'stub-model',
  tools: w.tools.map((t) => agents.tool({ name: t, description: D.TOOLS[t].description,
    parameters: z.object({ [D.TOOLS[t].param]: z.string() }),
    execute: async (a) => D.TOOLS[t].run(a) })),
});
const workers = Object.entries(D.WORKERS).filter(([name]) => name !== 'translator')
  .map(([name, w]) => agentOf(name, w).asTool({ toolName: `route_to_${name}`,
    toolDescription: `Hand the task to the ${name}` }));
const supervisor = new agents.Agent({ name: 'supervisor', instructions: D.SUPERVISOR_PROMPT,
  model: 'stub-model', tools: workers, handoffs: [agentOf('translator', D.WORKERS.translator)] });

async function turn(text) {
  let answer = '';
  for (let round = 0; round < D.loopRounds(text); round++) {
    const r = await agents.run(supervisor, text, { maxTurns: 6 });
    answer = String(r.finalOutput || '');
  }
  return answer;
}

harness.serve(otel, async (turns) => {
  const answers = [];
  for (const t of turns.slice(-6)) answers.push(await turn(t));
  return answers.join('\n');
}, { stdoutEvents: process.argv.includes('stdout') }).catch((err) => {
  process.stderr.write(`system.js: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
