/**
 * The built-in `echo` handler: answers with the task text. When the requester streams, it yields the
 * text word by word so the streaming path can be exercised end to end without a model.
 */
import type { TaskContext, WorkerHandler } from '../handlerApi.js';

async function* streamWords(text: string): AsyncGenerator<string, void> {
  const parts = text.split(/(?<=\s)/);
  for (const part of parts) yield part;
}

export const echoHandler: WorkerHandler = {
  name: 'echo',
  description: 'Echoes the text it is given (argument `text`).',
  readOnly: true,
  handle: (ctx: TaskContext) =>
    ctx.stream && ctx.text.length > 0 ? streamWords(ctx.text) : Promise.resolve(ctx.text),
};
