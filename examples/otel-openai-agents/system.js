#!/usr/bin/env node
// The task force of ../otel-common/domain.js on the OpenAI Agents SDK: the supervisor is an
// Agent whose handoffs are the workers (transfer_to_<worker>), each worker an Agent with its
// function tools. Spans come only from OpenInference's OpenAI Agents instrumentation (a
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

const workers = Object.entries(D.WORKERS).map(([name, w]) => new agents.Agent({
  name, instructions: w.prompt, model: 'stub-model',
  tools: w.tools.map((t) => agents.tool({ name: t, description: D.TOOLS[t].description,
    parameters: z.object({ [D.TOOLS[t].param]: z.string() }),
    execute: async (a) => D.TOOLS[t].run(a) })),
}));
const supervisor = new agents.Agent({ name: 'supervisor', instructions: D.SUPERVISOR_PROMPT,
  model: 'stub-model', handoffs: workers });

async function turn(text) {
  if (D.emptyAnswer(text)) return '';
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
