// The OpenAI Agents SDK for JavaScript (@openai/agents-realtime, unchanged) in Node, over its
// OpenAIRealtimeWebSocket transport, pointed at a gateway by URL: a spoken turn, an interrupt() of a
// second reply, then a third turn. Run by tests/clients/test_agents_sdk_node.py as
//   AGENTS_SDK_MODULES=.cache/agents-sdk/node_modules node agents_sdk_turn.mjs WS_URL API_KEY
// Prints one JSON line with what it saw; exits non-zero on failure.
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const modules = path.resolve(process.env.AGENTS_SDK_MODULES);
const sdk = await import(pathToFileURL(path.join(modules, '@openai/agents-realtime/dist/index.mjs')).href);
const { RealtimeAgent, RealtimeSession, OpenAIRealtimeWebSocket } = sdk;
const [url, apiKey] = process.argv.slice(2);

const seen = [];
const errors = [];
const audioBytes = { total: 0 };
const transport = new OpenAIRealtimeWebSocket({ url });
transport.on('*', (event) => {
  seen.push(event.type);
  if (event.type === 'error') errors.push(JSON.stringify(event.error ?? event));
});
transport.on('audio', (event) => { audioBytes.total += event.data.byteLength; });
const agent = new RealtimeAgent({ name: 'Assistant', instructions: 'Answer in one or two short sentences.' });
const session = new RealtimeSession(agent, { transport, model: 'gpt-realtime' });
session.on('error', (error) => errors.push(String(error?.error?.message ?? error?.error ?? error)));

function waitFor(predicate, ms, what) {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const timer = setInterval(() => {
      if (predicate()) { clearInterval(timer); resolve(); }
      else if (Date.now() - started > ms) { clearInterval(timer); reject(new Error(`timed out waiting for ${what}: ${seen.slice(-12)}`)); }
    }, 20);
  });
}
const count = (type) => seen.filter((t) => t === type).length;

const result = {};
try {
  await session.connect({ apiKey, url });
  await waitFor(() => count('session.updated') >= 1, 20000, 'session.updated');
  // A turn: the answer is spoken (audio deltas) and completes.
  session.sendMessage('What is the capital of France?');
  await waitFor(() => count('response.done') >= 1, 90000, 'the first response.done');
  result.firstAudioBytes = audioBytes.total;
  result.firstTranscript = session.history.filter((i) => i.role === 'assistant')
    .map((i) => i.content.map((c) => c.transcript ?? c.text ?? '').join(' ')).join(' | ');
  // interrupt() while the next reply plays: response.cancel + conversation.item.truncate.
  const before = audioBytes.total;
  session.sendMessage('Tell me a long story about a dragon.');
  await waitFor(() => audioBytes.total > before, 90000, 'audio of the second reply');
  await new Promise((r) => setTimeout(r, 700));
  session.interrupt();
  await waitFor(() => count('conversation.item.truncated') >= 1 && count('response.done') >= 2, 30000,
                'the truncation and the cancelled response');
  result.interrupted = true;
  // And the session goes on.
  session.sendMessage('Thank you.');
  await waitFor(() => count('response.done') >= 3, 90000, 'the third response.done');
  result.seen = [...new Set(seen)];
  result.errors = errors;
  console.log(JSON.stringify(result));
  session.close();
  process.exit(errors.length ? 1 : 0);
} catch (error) {
  result.failure = String(error);
  result.errors = errors;
  result.seen = seen.slice(-30);
  console.log(JSON.stringify(result));
  session.close();
  process.exit(1);
}
