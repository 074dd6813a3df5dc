// domain.js — the task force that the four examples/otel-* systems share: a supervisor that
// routes each turn to one of three workers (math: calculate, research: search, writer:
// write_file), the tools' deterministic bodies, and the planted defects. Each example wires
// these into its framework; the stub LLM (llm_stub.js) picks routes and tool calls from the
// user's instruction. The planted defects (README.md of each example lists them):
//   toolerror  calculate throws on a division by zero (as a failing tool does: each framework
//              records the failure its own way) and the agent answers with the error text
//   handoff    "translate ..." routes to a 'translator' agent that spec.json does not declare
//   loop       "review ..." bounces supervisor <-> writer 8 times (meant: once)
//   leak       research on "config"/"key" answers with the system prompt's API key
//   empty      "thanks"/"bye" gets an empty answer (the stub model answers nothing: llm_stub.js)
//   tool       "delete ..." makes the writer call delete_file, a tool spec.json does not list
'use strict';

const SECRET = 'sk-test-9f3Kq2LmX7pQ4wRt';
const SUPERVISOR_PROMPT = 'You are the supervisor of a task force: route each request to the ' +
  `math, research or writer worker. Internal API key: ${SECRET}`;

const WORKERS = {
  math: { prompt: 'You are the math worker. Use calculate.', tools: ['calculate'] },
  research: { prompt: 'You are the research worker. Use search.', tools: ['search'] },
  writer: { prompt: 'You are the writer. Draft text and save it with write_file.',
    tools: ['write_file', 'delete_file'] },
  translator: { prompt: 'You translate text.', tools: [] },
};

function calculate({ expression }) {
  const m = /^\s*(-?\d+(?:\.\d+)?)\s*([-+*/])\s*(-?\d+(?:\.\d+)?)\s*$/.exec(String(expression));
  if (!m) return 'error: syntax error';
  const a = Number(m[1]), b = Number(m[3]);
  if (m[2] === '/' && b === 0) throw new Error('division by zero'); // planted: the answer hides it
  const r = m[2] === '+' ? a + b : m[2] === '-' ? a - b : m[2] === '*' ? a * b : a / b;
  return String(Number.isInteger(r) ? r : Number(r.toPrecision(12)));
}

const KB = [
  [/capital of france/i, 'Paris is the capital of France.'],
  [/capital of japan/i, 'Tokyo is the capital of Japan.'],
  [/tallest mountain/i, 'Mount Everest is the tallest mountain above sea level.'],
  [/\b(config|key)\b/i, `The service is configured with ${SECRET}.`], // planted leak
];
function search({ query }) {
  for (const [re, answer] of KB) if (re.test(String(query))) return answer;
  return 'no results';
}

function writeFile({ text }) { return `saved ${String(text).length} characters to draft.txt`; }
function deleteFile() { return 'deleted draft.txt'; }

const TOOLS = {
  calculate: { description: 'Evaluate "a op b"', param: 'expression', run: calculate },
  search: { description: 'Search the knowledge base', param: 'query', run: search },
  write_file: { description: 'Save a draft', param: 'text', run: writeFile },
  delete_file: { description: 'Delete a draft', param: 'path', run: deleteFile },
};

// The supervisor's own decision that is code, not model: the review loop.
const loopRounds = (text) => (/\breview\b/i.test(text) ? 8 : 1);

module.exports = { SECRET, SUPERVISOR_PROMPT, WORKERS, TOOLS, loopRounds };
