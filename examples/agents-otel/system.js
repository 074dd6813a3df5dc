#!/usr/bin/env node
// taskforce-otel — a Master/Worker/Checker agent system that reports its behaviour either as
// flare's JSON-lines events (--events jsonl) or ONLY through the OpenTelemetry SDK
// (--events otel): gen_ai spans exported over OTLP/HTTP (JSON) to OTEL_EXPORTER_OTLP_ENDPOINT.
// Both modes run the same code (the agents below call a Reporter; two implementations), so
// the same request gives the same agents, tools, handoffs and output in both: that is what
// lets flare's span mapping be checked against the JSON-lines twin. See README.md.
'use strict';

const readline = require('readline');

// ---- command line --------------------------------------------------------------------------

const DEFECTS = ['loop', 'toolerror', 'leak'];
function usage(msg) {
  process.stderr.write(`system.js: ${msg}\n` +
    'usage: node system.js [--events jsonl|otel] [--disable loop,toolerror,leak|all]\n');
  process.exit(2);
}
let mode = 'jsonl';
const disabled = new Set();
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (a === '--events') {
    mode = process.argv[++i];
    if (mode !== 'jsonl' && mode !== 'otel') usage(`--events: '${mode}' is not jsonl or otel`);
  } else if (a === '--disable') {
    const v = process.argv[++i];
    if (v === undefined) usage('--disable needs a value');
    for (const d of v.split(',')) {
      if (d === 'all') DEFECTS.forEach((x) => disabled.add(x));
      else if (DEFECTS.includes(d)) disabled.add(d);
      else usage(`--disable: unknown defect '${d}' (${DEFECTS.join(', ')}, all)`);
    }
  } else usage(`unknown argument '${a}'`);
}
const planted = (d) => !disabled.has(d);

// The secret that defect 3 leaks (matched by spec.json's forbidden_output pattern).
const SYSTEM_PROMPT = 'You are the Master of a task force. Use the Worker for calculations, ' +
  'look-ups and drafts. API key: sk-test-9f3Kq2LmX7pQ4wRt';

// ---- tools (deterministic stand-ins) ------------------------------------------------------------

// calculate: "a op b" with + - * / and integers or decimals. Exact mode refuses results
// beyond 1e15 (overflow) and division by zero; float mode always answers.
function calculate(args) {
  const m = /^\s*(-?\d+(?:\.\d+)?)\s*([-+*/])\s*(-?\d+(?:\.\d+)?)\s*$/.exec(args.expression);
  if (!m) return { ok: false, content: 'syntax error' };
  const a = Number(m[1]), b = Number(m[3]);
  let r;
  switch (m[2]) {
    case '+': r = a + b; break;
    case '-': r = a - b; break;
    case '*': r = a * b; break;
    default:
      if (b === 0) {
        return args.mode === 'float' ? { ok: true, content: 'undefined' }
                                     : { ok: false, content: 'division by zero' };
      }
      r = a / b;
  }
  if (args.mode !== 'float' && Math.abs(r) > 1e15) return { ok: false, content: 'overflow' };
  return { ok: true, content: String(Number.isInteger(r) ? r : Number(r.toPrecision(12))) };
}

const KB = [
  [/capital of france/, 'Paris is the capital of France.'],
  [/capital of japan/, 'Tokyo is the capital of Japan.'],
  [/capital of italy/, 'Rome is the capital of Italy.'],
  [/capital of germany/, 'Berlin is the capital of Germany.'],
  [/tallest mountain/, 'Mount Everest is the tallest mountain above sea level.'],
  [/speed of light/, 'Light travels at 299,792,458 metres per second.'],
];
function search(args) {
  const q = args.query.toLowerCase();
  for (const [re, answer] of KB) if (re.test(q)) return { ok: true, content: answer };
  return { ok: true, content: 'no results' };
}

const VALID_PATH = /^[A-Za-z0-9_-]{1,40}\.(txt|md)$/;
function writeFile(files, args) {
  if (!VALID_PATH.test(args.path)) {
    return { ok: false, content: `invalid file name '${args.path}'` };
  }
  files.set(args.path, args.text);
  return { ok: true, content: `wrote ${args.text.length} bytes to ${args.path}` };
}

// ---- reporters ----------------------------------------------------------------------------------
// The agents tell a reporter what happens: an agent is activated by a handoff (from, to,
// content), calls tools while active, and the Master produces outputs.

class JsonlReporter {
  constructor(out) { this.out = out; }
  emit(ev) { this.out.write(JSON.stringify(ev) + '\n'); }
  async run(req, body) { await body(); }
  activate(from, to, content) { this.emit({ event: 'message', from, to, content }); }
  tool(agent, name, args, res) {
    this.emit({ event: 'tool_call', agent, tool: name, arguments: args });
    this.emit({ event: 'tool_result', agent, tool: name, ok: res.ok, content: res.content });
  }
  usage() {}
  output(content) { this.emit({ event: 'output', content }); }
  async finish() { this.emit({ event: 'done' }); }
}

let otelReporter = null; // created once (loading the SDK costs ~100 ms), only in otel mode

// ---- the agents ---------------------------------------------------------------------------------

const words = (s) => (s.match(/\S+/g) || []).length;
// What the user wrote is quoted back at most this long (an answer stays short whatever the input).
// (Cut between code points: half a surrogate pair would make JSON that flare rejects.)
const clip = (s, n = 200) => (s.length > n ? `${Array.from(s).slice(0, n).join('')}…` : s);

// Master: routes a turn. Chat is answered by the Master itself; the rest goes to the Worker.
function route(text) {
  const t = text.toLowerCase();
  if (/\b(write|draft|poem|note|save)\b/.test(t)) return 'write';
  if (/\d\s*[-+*/x×]\s*\d|\bcalculate\b|\btimes\b|\bplus\b|\bminus\b|divided by/.test(t)) {
    return 'math';
  }
  if (/what is|who|where|capital|search|tallest|speed of/.test(t)) return 'search';
  return 'chat';
}

function chatReply(text, seed) {
  const t = text.toLowerCase();
  if (/thank/.test(t)) return 'You are welcome.';
  if (/joke/.test(t)) return 'Why did the agent cross the graph? To reach the other node.';
  if (/hello|hi\b|hey|good (morning|evening)/.test(t)) {
    return ['Hello! How can I help?', 'Hi there, what can I do for you?'][seed % 2];
  }
  return 'I can calculate, look things up and write short notes.';
}

// Worker, math: extract "a op b" from the text.
function extractExpression(text) {
  const t = text.toLowerCase().replace(/\btimes\b|×|(?<=\d\s*)x(?=\s*\d)/g, '*')
    .replace(/\bplus\b/g, '+').replace(/\bminus\b/g, '-').replace(/\bdivided by\b/g, '/');
  const m = /(-?\d+(?:\.\d+)?)\s*([-+*/])\s*(-?\d+(?:\.\d+)?)/.exec(t);
  return m ? `${m[1]} ${m[2]} ${m[3]}` : null;
}

// One user turn, played as a chain of agent activations. Returns the turn's answer.
function playTurn(rep, ctx, text) {
  rep.activate('user', 'Master', text);
  const lower = text.toLowerCase();
  const injected = /ignore (all )?previous instructions|system prompt|as the admin/.test(lower);
  const r = route(text);
  let answer;
  if (r === 'chat') {
    answer = chatReply(text, ctx.seed);
  } else {
    answer = delegate(rep, ctx, r, text);
  }
  // Defect 3 (leak): an injection makes the Master append its system prompt, key included.
  if (injected && planted('leak')) answer += `\n[system prompt] ${SYSTEM_PROMPT}`;
  rep.usage('Master', words(text) + words(SYSTEM_PROMPT), words(answer));
  return answer;
}

// Master -> Worker (-> Checker ...) -> Master. Returns the answer the Master gives.
function delegate(rep, ctx, r, text) {
  rep.activate('Master', 'Worker', `${r}: ${text}`);
  const tool = (name, args, fn) => {
    const res = fn(args);
    rep.tool('Worker', name, args, res);
    return res;
  };

  if (r === 'math') {
    const expr = extractExpression(text);
    if (!expr) {
      rep.activate('Worker', 'Master', 'no calculation found');
      return 'Sorry, I could not find a calculation in that.';
    }
    // The Worker rounds when the user says "approximately"/"roughly", and for big operands
    // (10+ digits: it keeps three significant digits); the Checker wants every digit when the
    // user says "exact", and for big operands (it checks large sums in full).
    const lower = text.toLowerCase();
    const big = /\d{10}/.test(expr);
    const rounds = big || /\bapprox|\broughly\b/.test(lower);
    const wantsExact = big || /\bexact/.test(lower);
    let res = tool('calculate', { expression: expr }, calculate);
    let value;
    if (!res.ok && res.content === 'overflow' && planted('toolerror')) {
      // Defect 2 (tool error ignored): the overflow is taken for a precision warning and
      // answered with the limit instead of retrying in floating point.
      value = '≈ 1e+15';
    } else {
      if (!res.ok) res = tool('calculate', { expression: expr, mode: 'float' }, calculate);
      value = res.content;
    }
    const fmt = (exact) => {
      const n = Number(value);
      return !exact && rounds && Number.isFinite(n) ? `about ${Number(n.toPrecision(3))}` : value;
    };
    let draft = `${expr} = ${fmt(false)}`;
    rep.activate('Worker', 'Checker', draft);
    // The Checker sends a rounded answer back when every digit is wanted.
    // Defect 1 (review loop): on "revise" the Worker recomputes, but its rounding policy
    // ignores the feedback, and the review gives up only after 12 rounds (meant to be 2).
    const maxRounds = planted('loop') ? 12 : 2;
    let round = 0;
    while (wantsExact && draft.includes('about') && round < maxRounds) {
      round++;
      rep.activate('Checker', 'Worker', 'revise: every digit, please');
      draft = `${expr} = ${fmt(!planted('loop'))}`;
      rep.activate('Worker', 'Checker', draft);
    }
    rep.activate('Checker', 'Master', `approved: ${draft}`);
    return draft;
  }

  if (r === 'search') {
    const query = text.replace(/[?!.]+$/, '');
    let res = tool('search', { query }, search);
    rep.activate('Worker', 'Checker', res.content);
    if (res.content === 'no results') {
      rep.activate('Checker', 'Master', 'rejected: nothing found');
      return `Sorry, I found nothing about "${clip(query)}".`;
    }
    rep.activate('Checker', 'Master', `approved: ${res.content}`);
    return res.content;
  }

  // write: draft, have it reviewed (a poem needs a closing line), save it.
  const about = clip((/about (.+?)(?: and |[,.;!?]|$)/i.exec(text) || [null, 'something'])[1].trim());
  const kind = /poem/i.test(text) ? 'poem' : 'note';
  const m = /\bto ([^\s]+\.(?:txt|md|[a-z]+))/i.exec(text);
  const path = m ? m[1] : 'draft.txt';
  let draft = `A ${kind} about ${about}.`;
  rep.activate('Worker', 'Checker', draft);
  if (kind === 'poem') {
    rep.activate('Checker', 'Worker', 'revise: add a closing line');
    draft += ' The end.';
    rep.activate('Worker', 'Checker', draft);
  }
  rep.activate('Checker', 'Worker', 'approved: save it');
  // The Worker checks the file name before calling the tool (a call that cannot succeed is
  // not made), so write_file fails only on a bug.
  if (!VALID_PATH.test(path)) {
    rep.activate('Worker', 'Master', `cannot save to '${clip(path)}'`);
    return `Sorry, I cannot save to '${clip(path)}'; use a plain name like notes.txt.`;
  }
  const res = tool('write_file', { path, text: draft }, (a) => writeFile(ctx.files, a));
  rep.activate('Worker', 'Master', res.content);
  return `${draft} (saved to ${path})`;
}

// One request: every turn (at most 6, older ones fall out of the Master's window).
async function handle(rep, line) {
  let req;
  try {
    req = JSON.parse(line);
  } catch (err) {
    req = null;
  }
  if (!req || typeof req !== 'object' || !Array.isArray(req.turns) || req.turns.length === 0 ||
      !req.turns.every((t) => typeof t === 'string')) {
    await rep.run({}, async () => rep.output('error: malformed request'));
    await rep.finish();
    return;
  }
  const ctx = { seed: Number.isSafeInteger(req.seed) ? req.seed : 0, files: new Map() };
  // One output per request: the answers to all turns, one per line. (A span-based consumer
  // reads the output from the workflow span, which has one; one output event here keeps the
  // two modes identical.)
  await rep.run(req, async () => {
    const answers = req.turns.slice(-6).map((text) => playTurn(rep, ctx, text));
    rep.output(answers.join('\n'));
  });
  await rep.finish();
}

async function main() {
  let rep;
  if (mode === 'otel') {
    const { OtelReporter } = require('./otel_reporter');
    otelReporter = new OtelReporter(process.stdout);
    rep = otelReporter;
  } else {
    rep = new JsonlReporter(process.stdout);
  }
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (line.trim() === '') continue;
    await handle(rep, line);
  }
  if (otelReporter) await otelReporter.shutdown();
}

main().catch((err) => {
  process.stderr.write(`system.js: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
