/**
 * Pieces the MCP client tests share: the text of a tool result, and a 2.x client connected to an MCP
 * URL whose `tools/call` answers' content types are recorded (JSON: the fast path; SSE: the SDK's).
 */
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as TransportV2,
} from '@modelcontextprotocol/client';

/** The text parts of a `tools/call` result, joined. */
export function textOf(result: unknown): string {
  return (result as { content: Array<{ type: string; text?: string }> }).content
    .map((c) => (c.type === 'text' ? (c.text ?? '') : ''))
    .join('');
}

/** A connected 2.x client of `url` and the content type of each `tools/call` answer it got, in order. */
export async function connectV2(
  url: string,
  options: ConstructorParameters<typeof ClientV2>[1] = {},
): Promise<{ client: ClientV2; callTypes: string[] }> {
  const callTypes: string[] = [];
  const observed: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const body = typeof init?.body === 'string' ? init.body : '';
    if (body.includes('"tools/call"')) callTypes.push(res.headers.get('content-type') ?? '');
    return res;
  };
  const client = new ClientV2({ name: 'amf-test-v2', version: '1.0.0' }, options);
  await client.connect(new TransportV2(new URL(url), { fetch: observed }));
  return { client, callTypes };
}
