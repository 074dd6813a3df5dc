#!/usr/bin/env node
// The task force of ../otel-common/domain.js on LangGraph.js: a StateGraph whose nodes are the
// supervisor and the workers (each worker a prebuilt ReAct agent with its tools); the
// supervisor's model picks a worker through route_to_<worker> tool calls. Spans come only from
// OpenInference's LangChain instrumentation (LangGraph's node names are in their metadata).
// Model: ChatOpenAI at OPENAI_BASE_URL (the stub).
//   node system.js [--events otel|stdout]   stdout: also print each answer as an output event.
'use strict';
const harness = require('../otel-common/harness');
const otel = harness.setup(require, 'otel-langgraph');
const { LangChainInstrumentation } = require('@arizeai/openinference-instrumentation-langchain');
new LangChainInstrumentation().manuallyInstrument(require('@langchain/core/callbacks/manager'));

const { StateGraph, Annotation, START, END } = require('@langchain/langgraph');
const { createReactAgent } = require('@langchain/langgraph/prebuilt');
const { ChatOpenAI } = require('@langchain/openai');
const { tool } = require('@langchain/core/tools');
const { HumanMessage, SystemMessage } = require('@langchain/core/messages');
const { z } = require('zod');
const D = require('../otel-common/domain');

const model = new ChatOpenAI({ model: 'stub-model', apiKey: 'stub', temperature: 0,
  configuration: { baseURL: process.env.OPENAI_BASE_URL || 'http://127.0.0.1:8000/v1' } });

const workers = {};
for (const [name, w] of Object.entries(D.WORKERS)) {
  const tools = w.tools.map((t) => tool(async (a) => D.TOOLS[t].run(a), { name: t,
    description: D.TOOLS[t].description, schema: z.object({ [D.TOOLS[t].param]: z.string() }) }));
  workers[name] = createReactAgent({ llm: model, tools, name, prompt: w.prompt });
}
const routes = Object.keys(D.WORKERS).map((w) => tool(async () => w, { name: `route_to_${w}`,
  description: `Hand the task to the ${w}`, schema: z.object({ task: z.string() }) }));
const router = model.bindTools(routes);

const State = Annotation.Root({
  task: Annotation(), next: Annotation(), answer: Annotation(), rounds: Annotation(),
});

async function supervisor(s) {
  if ((s.rounds || 0) >= D.loopRounds(s.task)) return { next: END };
  const r = await router.invoke([new SystemMessage(D.SUPERVISOR_PROMPT), new HumanMessage(s.task)]);
  const call = (r.tool_calls || [])[0];
  if (!call) return { next: END, answer: String(r.content) };
  return { next: call.name.replace(/^route_to_/, ''), rounds: (s.rounds || 0) + 1 };
}

let graph = new StateGraph(State).addNode('supervisor', supervisor);
for (const name of Object.keys(workers)) {
  graph = graph.addNode(name, async (s) => {
    const r = await workers[name].invoke({ messages: [new HumanMessage(s.task)] });
    return { answer: String(r.messages[r.messages.length - 1].content) };
  }).addEdge(name, 'supervisor');
}
graph = graph.addEdge(START, 'supervisor')
  .addConditionalEdges('supervisor', (s) => s.next, [...Object.keys(workers), END]);
const app = graph.compile({ name: 'taskforce' });

async function turn(text) {
  const s = await app.invoke({ task: text, rounds: 0 }, { recursionLimit: 40 });
  return s.answer || '';
}

harness.serve(otel, async (turns) => {
  const answers = [];
  for (const t of turns.slice(-6)) answers.push(await turn(t));
  return answers.join('\n');
}, { stdoutEvents: process.argv.includes('stdout') }).catch((err) => {
  process.stderr.write(`system.js: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
