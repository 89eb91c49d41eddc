// A worker handler that follows the A2A TCK's scenario conventions (its `scenarios/*.feature`): what
// it does is picked by the prefix of the A2A message id (`tck-<scenario>-<session>`), so the TCK can
// drive the whole task lifecycle — artifacts of every kind, a Message instead of a Task, input
// required and its follow-ups, rejection and streaming — against a worker or through the mesh.
//   amf worker --name tck --tags tck --handler examples/tck-agent.mjs
import { Buffer } from 'node:buffer';
import { setTimeout as sleep } from 'node:timers/promises';
import { TaskRejectedError } from 'amf-mesh';

const FILE_BYTES = Buffer.from('tck').toString('base64');

/** A finished answer made of one artifact (no separate answer text). */
const artifact = (...parts) => ({ text: '', artifacts: [{ name: 'output', parts }] });

/** The answer for one message id; undefined when the scenario asks for more input. */
function answer(messageId) {
  const is = (prefix) => messageId.startsWith(`tck-${prefix}`);
  if (is('artifact-file-url'))
    return artifact({
      file: { uri: 'https://example.com/output.txt', name: 'output.txt', mediaType: 'text/plain' },
    });
  if (is('artifact-text')) return artifact({ text: 'Generated text content' });
  if (is('artifact-file'))
    return artifact({ file: { bytes: FILE_BYTES, name: 'output.txt', mediaType: 'text/plain' } });
  if (is('artifact-data')) return artifact({ data: { key: 'value', count: 42 } });
  if (is('message-response')) return { text: 'Direct message response', respondWith: 'message' };
  if (is('reject-task')) throw new TaskRejectedError('rejected');
  if (is('input-required')) return undefined;
  if (is('complete-task')) return { text: 'Hello from TCK' };
  return { text: `Unhandled messageId prefix: ${messageId}` };
}

/** Streaming scenarios: chunks to yield, then what to return. */
const STREAMS = [
  ['tck-stream-artifact-chunked', ['chunk-1 ', 'chunk-2'], undefined],
  ['tck-stream-artifact-text', ['Streamed text content'], undefined],
  [
    'tck-stream-artifact-file',
    [],
    artifact({ file: { bytes: FILE_BYTES, name: 'output.txt', mediaType: 'text/plain' } }),
  ],
  ['tck-stream-ordering-001', ['Ordered output'], undefined],
  ['tck-stream-001', ['Stream hello from TCK'], undefined],
  ['tck-stream-002', [], { text: '' }],
  ['tck-stream-003', ['Stream task lifecycle'], undefined],
];

async function* stream(ctx, chunks, result) {
  ctx.progress('working');
  for (const chunk of chunks) yield chunk;
  return result;
}

export default {
  name: 'tck-agent',
  description: 'Follows the A2A TCK scenario conventions (tck-* message ids) for conformance runs',
  handle(ctx) {
    const messageId = ctx.messageId ?? '';
    const streamed = STREAMS.find(([prefix]) => messageId.startsWith(prefix));
    if (streamed) return stream(ctx, streamed[1], streamed[2]);
    if (messageId.startsWith('test-resubscribe-message-id'))
      return (async () => {
        ctx.progress('working');
        await sleep(4000);
        return { text: '' };
      })();
    return (async () => {
      let id = messageId;
      // Input required: the same handler waits for each follow-up and answers by its message id.
      for (;;) {
        const result = answer(id);
        if (result) return result;
        const next = await ctx.requestInput('The TCK scenario asks for more input');
        id = next.messageId ?? '';
      }
    })();
  },
};
