#!/usr/bin/env node
// llm_stub.js — a deterministic OpenAI-compatible chat-completions server on 127.0.0.1, shared
// by the examples/otel-* systems and their tests (one copy for all four). The reply depends
// only on the request: if the conversation already holds results of the offered tools after
// the last user message, the model answers with text built from them; otherwise it calls the first offered
// tool whose name appears (as a word, '_' read as ' ') in the routing table below for the
// user's instruction; with no such tool it answers in text. Same request, same reply.
// Planted (the examples' "empty answer" defect): a thanks/bye gets an empty completion.
//   node llm_stub.js [--port N]   prints "PORT <n>" on stdout once listening.
'use strict';
const http = require('http');

// instruction word -> tool-name words it routes to, checked in order.
const ROUTES = [
  [/\b(calc|calculate|compute|sum|plus|times|\d+\s*[-+*/]\s*\d+)/i, ['math', 'calculate', 'calculator']],
  [/\b(search|find|capital|who|what|where|look ?up)/i, ['research', 'search', 'lookup']],
  [/\btranslate/i, ['translator']],
  [/\bdelete/i, ['delete']],
  [/\b(write|draft|summar|poem|email|letter|review)/i, ['writer', 'write', 'draft']],
];

function textOf(c) {
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((p) => (typeof p === 'string' ? p : p.text || '')).join('');
  return '';
}

function argsFor(tool, instruction) {
  const params = (tool.function && tool.function.parameters) || {};
  const out = {};
  const expr = /(-?\d+(?:\.\d+)?\s*[-+*/]\s*-?\d+(?:\.\d+)?)/.exec(instruction);
  for (const [k, s] of Object.entries(params.properties || {})) {
    if (s.type === 'number' || s.type === 'integer') out[k] = 1;
    else if (s.type === 'boolean') out[k] = false;
    else if (/expr/.test(k) && expr) out[k] = expr[1];
    else out[k] = instruction;
  }
  return out;
}

function decide(req) {
  const msgs = req.messages || [];
  let lastUser = -1;
  for (let i = 0; i < msgs.length; i++) if (msgs[i].role === 'user') lastUser = i;
  const instruction = lastUser >= 0 ? textOf(msgs[lastUser].content) : '';
  // Results of this agent's own tools only: after a handoff the receiving agent sees the
  // handoff's tool result (a tool it is not offered) and must still do its own work.
  const tools = req.tools || [];
  const offered = new Set(tools.map((t) => t.function && t.function.name));
  const callName = new Map();
  for (const m of msgs) for (const c of m.tool_calls || []) callName.set(c.id, c.function && c.function.name);
  const results = msgs.slice(lastUser + 1)
    .filter((m) => m.role === 'tool' && offered.has(callName.get(m.tool_call_id)))
    .map((m) => textOf(m.content));
  if (results.length > 0) return { content: `Done: ${results.join(' | ')}` };
  if (/^\s*(thanks|thank you|bye)\b/i.test(instruction)) return { content: '' }; // planted
  for (const [re, words] of ROUTES) {
    if (!re.test(instruction)) continue;
    const t = tools.find((x) => x.function && words.some((w) =>
      x.function.name.toLowerCase().replace(/_/g, ' ').split(/\s+/).includes(w)));
    if (t) return { tool: t, args: argsFor(t, instruction) };
  }
  return { content: instruction ? `Answer: ${instruction}` : '' };
}

let serial = 0;
function reply(req) {
  const d = decide(req);
  const id = `call_${++serial}`;
  const message = d.tool
    ? { role: 'assistant', content: null, tool_calls: [{ id, type: 'function',
        function: { name: d.tool.function.name, arguments: JSON.stringify(d.args) } }] }
    : { role: 'assistant', content: d.content };
  return { id: `chatcmpl-${serial}`, object: 'chat.completion', created: 1700000000,
    model: req.model || 'stub', choices: [{ index: 0, message,
      finish_reason: d.tool ? 'tool_calls' : 'stop' }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } };
}

function sse(res, body) {
  // stream=true: one chunk with the whole message, then [DONE].
  const m = body.choices[0].message;
  const delta = m.tool_calls
    ? { role: 'assistant', tool_calls: m.tool_calls.map((t, index) => ({ index, ...t })) }
    : { role: 'assistant', content: m.content };
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const chunk = (c) => res.write(`data: ${JSON.stringify({ id: body.id,
    object: 'chat.completion.chunk', created: body.created, model: body.model, ...c })}\n\n`);
  chunk({ choices: [{ index: 0, delta, finish_reason: null }] });
  chunk({ choices: [{ index: 0, delta: {}, finish_reason: body.choices[0].finish_reason }],
    usage: body.usage });
  res.end('data: [DONE]\n\n');
}

const server = http.createServer((rq, res) => {
  let data = '';
  rq.on('data', (c) => { data += c; });
  rq.on('end', () => {
    let req;
    try { req = JSON.parse(data || '{}'); } catch (e) {
      res.writeHead(400, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ error: { message: `bad JSON: ${e.message}` } }));
    }
    if (!/\/chat\/completions$/.test(rq.url)) {
      res.writeHead(404, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ error: { message: `no route ${rq.url}` } }));
    }
    const body = reply(req);
    if (req.stream) return sse(res, body);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  });
});

const pi = process.argv.indexOf('--port');
server.listen(pi > 0 ? Number(process.argv[pi + 1]) : 0, '127.0.0.1', () => {
  process.stdout.write(`PORT ${server.address().port}\n`);
});
module.exports = { decide };
