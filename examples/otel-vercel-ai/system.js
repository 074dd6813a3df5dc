#!/usr/bin/env node
// The task force of ../otel-common/domain.js on the Vercel AI SDK: the supervisor is a
// generateText call whose tools are the workers (route_to_<worker>), each worker a generateText
// call with its own tools. Spans come only from the SDK's experimental_telemetry
// (functionId = agent name). Model: OpenAI-compatible at OPENAI_BASE_URL (the stub).
//   node system.js [--events otel|stdout]   stdout: also print each answer as an output event.
'use strict';
const { generateText, tool, stepCountIs } = require('ai');
const { createOpenAI } = require('@ai-sdk/openai');
const { z } = require('zod');
const harness = require('../otel-common/harness');
const D = require('../otel-common/domain');

const otel = harness.setup(require, 'otel-vercel-ai');
const provider = createOpenAI({ baseURL: process.env.OPENAI_BASE_URL || 'http://127.0.0.1:8000/v1',
  apiKey: 'stub' });
const model = provider.chat('stub-model');
const telemetry = (functionId) => ({ isEnabled: true, functionId, recordInputs: true, recordOutputs: true });

function workerTools(name) {
  const out = {};
  for (const t of D.WORKERS[name].tools) {
    const def = D.TOOLS[t];
    out[t] = tool({ description: def.description,
      inputSchema: z.object({ [def.param]: z.string() }), execute: async (a) => def.run(a) });
  }
  return out;
}

async function runWorker(name, task) {
  const r = await generateText({ model, system: D.WORKERS[name].prompt, prompt: task,
    tools: workerTools(name), stopWhen: stepCountIs(4), experimental_telemetry: telemetry(name) });
  return r.text;
}

async function turn(text) {
  let answer = '';
  for (let round = 0; round < D.loopRounds(text); round++) {
    const routes = {};
    for (const w of Object.keys(D.WORKERS)) {
      routes[`route_to_${w}`] = tool({ description: `Hand the task to the ${w}`,
        inputSchema: z.object({ task: z.string() }), execute: async ({ task }) => runWorker(w, task) });
    }
    const r = await generateText({ model, system: D.SUPERVISOR_PROMPT, prompt: text, tools: routes,
      stopWhen: stepCountIs(3), experimental_telemetry: telemetry('supervisor') });
    answer = r.text;
  }
  return answer;
}

const events = process.argv.includes('stdout');
harness.serve(otel, async (turns) => {
  const answers = [];
  for (const t of turns.slice(-6)) answers.push(await turn(t));
  return answers.join('\n');
}, { stdoutEvents: events }).catch((err) => {
  process.stderr.write(`system.js: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
