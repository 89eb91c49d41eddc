/**
 * Real JetStream refusing writes, as a replicated stream electing its leader (or a full one) does:
 * the stream is set to take no more bytes, discarding new messages, under a running mesh.
 */
import { DiscardPolicy, type JetStreamManager } from '@nats-io/jetstream';

/** Makes `stream` refuse every new message; resolves the function that takes its limits back. */
export async function refuseStreamWrites(
  jsm: JetStreamManager,
  stream: string,
): Promise<() => Promise<void>> {
  const before = (await jsm.streams.info(stream)).config;
  await jsm.streams.update(stream, { max_bytes: 1, discard: DiscardPolicy.New });
  let restored = false;
  return async () => {
    if (restored) return;
    restored = true;
    await jsm.streams.update(stream, { max_bytes: before.max_bytes, discard: before.discard });
  };
}
