// The official `openai` client, unchanged, against a spawned `fucina serve` on a free
// loopback port with a random-weight `fucina synth` model. Run by run_openai_node_test.sh
// (env: FUCINA_BIN, OPENAI_PREFIX where node_modules/openai is, WORK_DIR for the model).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';

const FUCINA = process.env.FUCINA_BIN;
const require = createRequire(path.join(process.env.OPENAI_PREFIX, 'node_modules') + '/');
const openaiModule = require('openai');
const OpenAI = openaiModule.OpenAI ?? openaiModule.default ?? openaiModule;
const MODEL = path.join(process.env.WORK_DIR, 'tiny.gguf');

// Starts `fucina serve` and resolves once it logs "ready"; the port is the one it printed.
function startServer(...flags) {
  return new Promise((resolve, reject) => {
    const proc = spawn(FUCINA, ['serve', MODEL, '--port', '0', '-t', '1', '-c', '1024', ...flags], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    let port = null;
    proc.stderr.on('data', (d) => {
      log += d;
      const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) port = Number(m[1]);
      if (/: ready\n/.test(log)) resolve({ proc, port, log: () => log });
    });
    proc.on('exit', (code) => reject(new Error(`fucina serve exited with ${code}:\n${log}`)));
  });
}

function stopServer(s) {
  return new Promise((resolve) => {
    s.proc.removeAllListeners('exit');
    s.proc.on('exit', (code, signal) => resolve({ code, signal }));
    s.proc.kill('SIGTERM');
  });
}

// `fucina run`'s stdout for the same request (what the user sees there).
function fucinaRun(...args) {
  return execFileSync(FUCINA, ['run', MODEL, '-t', '1', '-c', '1024', ...args], { stdio: ['ignore', 'pipe', 'ignore'] }).toString('utf8');
}

let server;
let client;
before(async () => {
  execFileSync(FUCINA, ['synth', MODEL, '--arch', 'qwen3', '--dtype', 'f16', '--seed', '5'], { stdio: 'ignore' });
  server = await startServer();
  client = new OpenAI({ baseURL: `http://127.0.0.1:${server.port}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  const { code } = await stopServer(server);
  assert.equal(code, 0, 'the server exits cleanly on SIGTERM');
});

const system = 'You are terse.';
const user = 'Name three colours.';
const messages = [{ role: 'system', content: system }, { role: 'user', content: user }];

test('models list', async () => {
  const list = await client.models.list();
  const ids = [];
  for await (const m of list) ids.push(m.id);
  assert.deepEqual(ids, ['tiny.gguf']);
});

test('chat at temperature 0 equals fucina run --chat', async () => {
  const r = await client.chat.completions.create({ model: 'tiny.gguf', messages, temperature: 0, max_tokens: 24 });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  const expected = fucinaRun('--chat', '--system', system, '-p', user, '--temp', '0', '-n', '24');
  assert.equal(r.choices[0].message.content, expected);
  assert.ok(expected.length > 0);
  assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.ok(r.usage.completion_tokens <= 24 && r.usage.prompt_tokens > 0);
});

test('streamed chat gives the same text, then usage', async () => {
  const whole = await client.chat.completions.create({ model: 'tiny.gguf', messages, temperature: 0, max_tokens: 20 });
  const stream = await client.chat.completions.create({
    model: 'tiny.gguf', messages, temperature: 0, max_tokens: 20, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      finish = c.finish_reason ?? finish;
    }
  }
  assert.ok(chunks >= 3);
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.deepEqual(usage, whole.usage);
});

test('completions, plain and streamed, equal fucina run', async () => {
  const prompt = 'Once upon a time';
  const expected = fucinaRun('-p', prompt, '--temp', '0', '-n', '16');
  const r = await client.completions.create({ model: 'tiny.gguf', prompt, temperature: 0, max_tokens: 16 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0].text, expected);
  const stream = await client.completions.create({ model: 'tiny.gguf', prompt, temperature: 0, max_tokens: 16, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices.map((c) => c.text).join('');
  assert.equal(text, expected);
});

test('stop ends the text before the stop string', async () => {
  const free = (await client.completions.create({ model: 'tiny.gguf', prompt: 'abc', temperature: 0, max_tokens: 40 })).choices[0].text;
  // Two plain characters from the middle of the free text.
  let at = -1;
  for (let i = 4; i + 2 <= free.length && at < 0; i++) if (/^[a-zA-Z0-9 ]{2}$/.test(free.slice(i, i + 2))) at = i;
  assert.ok(at >= 0, `no plain pair in ${JSON.stringify(free)}`);
  const stop = free.slice(at, at + 2);
  const r = await client.completions.create({ model: 'tiny.gguf', prompt: 'abc', temperature: 0, max_tokens: 40, stop: [stop, 'never-seen'] });
  assert.equal(r.choices[0].text, free.slice(0, free.indexOf(stop)));
  assert.equal(r.choices[0].finish_reason, 'stop');
});

test('max_tokens bounds the output', async () => {
  const r = await client.chat.completions.create({ model: 'tiny.gguf', messages, temperature: 0, max_tokens: 5, ignore_eos: true });
  assert.equal(r.usage.completion_tokens, 5);
  assert.equal(r.choices[0].finish_reason, 'length');
  const r2 = await client.chat.completions.create({ model: 'tiny.gguf', messages, temperature: 0, max_completion_tokens: 3, ignore_eos: true });
  assert.equal(r2.usage.completion_tokens, 3);
});

test('a seed reproduces a sampled output', async () => {
  const ask = (seed) => client.chat.completions.create({ model: 'tiny.gguf', messages, temperature: 1, top_k: 0, top_p: 1, min_p: 0, seed, max_tokens: 32, ignore_eos: true });
  const a = (await ask(42)).choices[0].message.content;
  const b = (await ask(42)).choices[0].message.content;
  const c = (await ask(43)).choices[0].message.content;
  assert.equal(a, b);
  assert.notEqual(a, c);
});

test('n=2 gives two choices', async () => {
  const r = await client.chat.completions.create({ model: 'tiny.gguf', messages, temperature: 1, seed: 7, n: 2, max_tokens: 16, ignore_eos: true });
  assert.equal(r.choices.length, 2);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  assert.notEqual(r.choices[0].message.content, r.choices[1].message.content);
  assert.equal(r.usage.completion_tokens, 32);
});

test('logprobs with top_logprobs', async () => {
  const r = await client.chat.completions.create({ model: 'tiny.gguf', messages, temperature: 0, max_tokens: 8, ignore_eos: true, logprobs: true, top_logprobs: 3 });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, 8);
  for (const t of content) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    // Greedy: the chosen token is the most likely one.
    assert.equal(t.logprob, t.top_logprobs[0].logprob);
    assert.deepEqual(Buffer.from(t.bytes).toString('utf8'), Buffer.from(t.top_logprobs[0].bytes).toString('utf8'));
    assert.ok(t.top_logprobs[1].logprob <= t.top_logprobs[0].logprob);
  }
});

test('bad JSON and wrong types are 400s the client reports', async () => {
  const res = await fetch(`http://127.0.0.1:${server.port}/v1/chat/completions`, { method: 'POST', body: '{"messages": [', headers: { 'Content-Type': 'application/json' } });
  assert.equal(res.status, 400);
  const body = await res.json();
  assert.equal(body.error.type, 'invalid_request_error');
  await assert.rejects(client.chat.completions.create({ model: 'tiny.gguf', messages, temperature: 'hot' }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.status, 400);
    assert.equal(e.param, 'temperature');
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model: 'tiny.gguf', messages, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: 5 } } }), (e) => {
    assert.equal(e.status, 400);
    assert.match(e.param, /^response_format/);
    return true;
  });
});

test('response_format json_schema constrains a random model to the schema', async () => {
  const schema = { type: 'object', properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['ok', 'n'], additionalProperties: false };
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({ model: 'tiny.gguf', messages, temperature: 1, seed, max_tokens: 64,
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } } });
    assert.equal(r.choices[0].finish_reason, 'stop', r.choices[0].message.content);
    const v = JSON.parse(r.choices[0].message.content);
    assert.deepEqual(Object.keys(v), ['ok', 'n']);
    assert.equal(typeof v.ok, 'boolean');
    assert.ok(Number.isInteger(v.n) && v.n >= 0 && v.n <= 9, r.choices[0].message.content);
  }
});

test('a bad API key is a 401', async () => {
  const keyed = await startServer('--api-key', 'right-key');
  try {
    const base = `http://127.0.0.1:${keyed.port}/v1`;
    const bad = new OpenAI({ baseURL: base, apiKey: 'wrong-key', maxRetries: 0 });
    await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    const good = new OpenAI({ baseURL: base, apiKey: 'right-key', maxRetries: 0 });
    const r = await good.chat.completions.create({ model: 'tiny.gguf', messages, temperature: 0, max_tokens: 2 });
    assert.equal(r.choices.length, 1);
  } finally {
    await stopServer(keyed);
  }
});
